"""``kittiwake sessions``: list, show, resume, watch, compact and delete sessions through the
HTTP API of a server (``--attach``, the one holding the data dir, or one started for the
command)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

import msgspec

from gateway._datadir import CliError
from gateway.cli._terminal import Runner, RunOptions, check, watch_sessions

if TYPE_CHECKING:
    import httpx

__all__ = ["sessions_command"]


async def sessions_command(api: httpx.AsyncClient, args: argparse.Namespace) -> None:
    """Run ``sessions ACTION`` against *api*, printing to standard output (a resume's
    progress to standard error).

    Raises ``CliError`` when a resumed session ends with an error, and the API's errors
    (``check``) for a failed request. Cancellation (Ctrl-C) stops a ``watch`` or a
    ``resume``'s wait; what the server does is unaffected.
    """
    if args.action == "list":
        page = check(await api.get("/api/session", params={"limit": args.limit}))
        for info in page["data"]:
            mark = "  [needs resume]" if info.get("needsResume") else ""
            print(f"{info['id']}  {info['title']}  {info['location']['directory']}{mark}")
    elif args.action == "resume":
        follow = RunOptions(
            text="", directory=os.getcwd(), session=args.id,
            password=os.environ.get("KITTIWAKE_SERVER_PASSWORD"),
        )  # fmt: skip
        await Runner(api, follow, out=sys.stderr).resume()  # its progress on stderr
        info = check(await api.get(f"/api/session/{args.id}"))["data"]
        error = info.get("lastError")
        if error:
            raise CliError(f"{error['_tag']}: {error['message']}")
        print(f"resumed {args.id}")
    elif args.action == "watch":
        page = (
            {"data": [{"id": args.id}]}
            if args.id
            else check(await api.get("/api/session", params={"limit": args.limit}))
        )
        password = os.environ.get("KITTIWAKE_SERVER_PASSWORD")
        ids = [info["id"] for info in page["data"]]
        await watch_sessions(api, ids, password=password, as_json=args.format == "json")
    elif args.action == "compact":
        check(await api.post(f"/api/session/{args.id}/compact"))
        check(await api.post(f"/api/session/{args.id}/wait"))
        context = check(await api.get(f"/api/session/{args.id}/context"))["data"]
        if context and context[0]["type"] == "compaction":
            print(f"compacted {args.id}")
        else:
            print(f"nothing to compact in {args.id}")
    elif args.action == "delete":
        project = check(await api.get(f"/api/session/{args.id}"))["data"]["projectID"]
        check(await api.delete(f"/project/{project}/session/{args.id}"))
        print(f"deleted {args.id}")
    else:
        info = check(await api.get(f"/api/session/{args.id}"))["data"]
        print(msgspec.json.format(msgspec.json.encode(info)).decode())
        messages = check(
            await api.get(f"/api/session/{args.id}/message", params={"order": "asc", "limit": 200})
        )
        for message in messages["data"]:
            print(f"--- {message['type']} {message['id']}")
            if "text" in message:
                print(message["text"])
            for part in message.get("content", []):
                if part.get("type") == "text":
                    print(part["text"])
                elif part.get("type") == "tool":
                    print(f"[tool {part['name']}: {part['state']['status']}]")
