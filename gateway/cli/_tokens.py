"""``kittiwake token create|list|revoke``: bearer tokens through the server's
``/api/token`` routes (the one holding the data dir, ``--attach URL``, or one served here
for the command)."""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import TYPE_CHECKING, Any

from gateway._datadir import CliError

if TYPE_CHECKING:
    import httpx

__all__ = ["token_command"]


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _checked(answer: httpx.Response) -> Any:
    if answer.is_success:
        return answer.json()
    try:
        message = answer.json()["message"]
    except (ValueError, KeyError, TypeError):
        message = answer.text
    raise CliError(f"the server answered {answer.status_code}: {message}")


async def token_command(api: httpx.AsyncClient, args: argparse.Namespace) -> int:
    """Carry out ``token create`` (prints the token, once), ``list`` or ``revoke``.

    Raises ``CliError`` with the server's message when it refuses.
    """
    if args.action == "create":
        if not args.user or not args.project or not args.role:
            raise CliError("token create needs --user, --project (an id or *) and --role", 2)
        body = {"user": args.user, "project": args.project, "role": args.role}
        if args.expires:
            body["expires"] = args.expires
        created = _checked(await api.post("/api/token", json=body))["data"]
        print(created["token"])
        info = created["info"]
        print(
            f"kittiwake: token {info['id']} for {info['user']} ({info['role']} on project "
            f"{info['project']}, expires {_when(info['timeExpires'])}); it is shown only once",
            file=sys.stderr,
        )
    elif args.action == "list":
        tokens = _checked(await api.get("/api/token", params={"limit": 1000}))["data"]
        for t in tokens:
            state = "revoked" if t["timeRevoked"] is not None else "active"
            print(
                f"{t['id']}  {t['user']}  {t['project']}  {t['role']}  created "
                f"{_when(t['timeCreated'])}  expires {_when(t['timeExpires'])}  {state}"
            )
    else:
        if not args.id:
            raise CliError("token revoke needs the token's id (token list shows them)", 2)
        _checked(await api.delete(f"/api/token/{args.id}"))
        print(f"revoked {args.id}")
    return 0
