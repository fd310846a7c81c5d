"""Revert and unrevert over V1 and V2 on a served runtime: files on disk, history, events,
a restart, and a new prompt after a revert."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from runtime import llm
from runtime.llm import LLMEvent, LLMRequest, ScriptedLLM, StepFinish, StepStart, ToolCall, Usage
from tests.gateway.conftest import answer, assert_valid, response_schema, served
from tests.gateway.v1 import V1Stream, v1_stream

TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "write it": ("write", {"filePath": "notes.txt", "content": "v1\n"}),
    "edit it": ("edit", {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}),
    "add one": ("write", {"filePath": "sub/new.txt", "content": "fresh\n"}),
    "be slow": ("shell", {"command": "sleep 30"}),
}


def _text(message: llm.Message) -> str:
    return " ".join(getattr(p, "text", "") for p in message.content)


def script(request: LLMRequest) -> Sequence[LLMEvent]:
    last = request.messages[-1]
    if isinstance(last, llm.UserMessage) and _text(last) in TOOLS:
        name, data = TOOLS[_text(last)]
        return [
            StepStart(),
            ToolCall(call_id=f"call_{len(request.messages)}", name=name, input=data),
            StepFinish(finish_reason="tool-calls", usage=Usage(input_tokens=3, output_tokens=1)),
        ]
    return answer(f"done {len(request.messages)}")


async def _prompt(client: httpx.AsyncClient, sid: str, text: str) -> str:
    r = await client.post(
        f"/session/{sid}/message", json={"parts": [{"type": "text", "text": text}]}, timeout=30
    )
    assert r.status_code == 200, r.text
    return str(r.json()["info"]["parentID"])


async def _messages(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/session/{sid}/message")
    assert r.status_code == 200
    assert_valid(r.json(), response_schema("/session/{sessionID}/message", "get", 200))
    return list(r.json())


async def _revert(client: httpx.AsyncClient, sid: str, message_id: str) -> dict[str, Any]:
    r = await client.post(f"/session/{sid}/revert", json={"messageID": message_id})
    assert r.status_code == 200, r.text
    assert_valid(r.json(), response_schema("/session/{sessionID}/revert", "post", 200))
    return dict(r.json())


async def _diffs(events: V1Stream, sid: str, count: int) -> list[str]:
    """The files of the *count*-th ``session.diff`` of *sid* (waited for); none follows it
    yet."""
    await events.until(lambda _: len(events.of("session.diff", sid)) >= count)
    diffs = events.of("session.diff", sid)
    assert len(diffs) == count
    return [f["file"] for f in diffs[-1]["properties"]["diff"]]


async def test_undo_and_redo_restore_files_history_and_survive_a_restart(tmp_path) -> None:
    notes, new = tmp_path / "notes.txt", tmp_path / "sub" / "new.txt"
    llm_ = ScriptedLLM(script)
    async with served(tmp_path, llm=llm_) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = (await client.post("/session", json={})).json()["id"]
        async with v1_stream(g.url) as events:
            await _prompt(client, sid, "write it")
            assert notes.read_text() == "v1\n"
            second = await _prompt(client, sid, "edit it")
            await _prompt(client, sid, "add one")
            assert (notes.read_text(), new.read_text()) == ("v2\n", "fresh\n")
            everything = [m["info"]["id"] for m in await _messages(client, sid)]
            assert len(everything) == 9  # three prompts, each a tool step and an answer

            body = await _revert(client, sid, second)  # /undo twice, as the UI does it
            assert body["revert"] == {"messageID": second}
            assert notes.read_text() == "v1\n" and not new.exists()
            shown = [m["info"]["id"] for m in await _messages(client, sid)]
            assert shown == everything[: everything.index(second)]
            updated = await events.until(
                lambda p: (
                    p["type"] == "session.updated"
                    and p["properties"]["info"].get("revert") == {"messageID": second}
                )
            )
            assert updated["properties"]["sessionID"] == sid
            # the session's diff again (OpenCode's UI lists it as "Modified Files"): one
            # after each tool step, then the revert's
            assert await _diffs(events, sid, 4) == ["notes.txt"]

            r = await client.post(f"/session/{sid}/unrevert")  # /redo
            assert r.status_code == 200 and "revert" not in r.json()
            assert_valid(r.json(), response_schema("/session/{sessionID}/unrevert", "post", 200))
            assert (notes.read_text(), new.read_text()) == ("v2\n", "fresh\n")
            assert [m["info"]["id"] for m in await _messages(client, sid)] == everything
            assert await _diffs(events, sid, 5) == ["notes.txt", "sub/new.txt"]
            await _revert(client, sid, second)

    # Durable: a new runtime on the same data directory still shows the revert.
    llm_ = ScriptedLLM(script)
    async with served(tmp_path, llm=llm_) as g, httpx.AsyncClient(base_url=g.url) as client:
        r = await client.get(f"/session/{sid}")
        assert r.json()["revert"] == {"messageID": second}
        assert len(await _messages(client, sid)) == everything.index(second)
        r = await client.post(f"/session/{sid}/unrevert")
        assert (notes.read_text(), new.read_text()) == ("v2\n", "fresh\n")
        await _revert(client, sid, second)
        assert notes.read_text() == "v1\n" and not new.exists()

        # A new prompt drops the reverted messages for good; files stay as reverted.
        async with v1_stream(g.url) as events:
            third = await _prompt(client, sid, "hello")
            removed = {p["properties"]["messageID"] for p in events.of("message.removed", sid)}
            assert removed == set(everything[everything.index(second) :])
        shown = [m["info"]["id"] for m in await _messages(client, sid)]
        assert shown[: everything.index(second)] == everything[: everything.index(second)]
        assert shown[everything.index(second)] == third and len(shown) == 5
        assert "revert" not in (await client.get(f"/session/{sid}")).json()
        # ... and out of the context the provider is sent
        assert all("edit it" not in _text(m) for m in llm_.requests[-1].messages)
        assert any("write it" in _text(m) for m in llm_.requests[-1].messages)
        assert notes.read_text() == "v1\n"
        r = await client.post(f"/session/{sid}/unrevert")  # nothing stands: no change
        assert r.status_code == 200 and notes.read_text() == "v1\n"

        # Every event that took a seq is in the V2 history, seqs 1..n (a before-image's and
        # a revert's files by path, not content).
        r = await client.get(f"/api/session/{sid}/history", params={"limit": 1000})
        history = r.json()["data"]
        assert [e["durable"]["seq"] for e in history] == list(range(1, len(history) + 1))
        kinds = {e["type"] for e in history}
        assert {
            "session.tool.file.before", "session.reverted", "session.unreverted",
            "session.revert.committed",
        } <= kinds  # fmt: skip
        for event in history:
            if "files" in event["data"]:
                assert all(set(f) == {"path"} for f in event["data"]["files"]), event


async def test_v2_stage_commit_clear_and_bad_input(tmp_path) -> None:
    notes = tmp_path / "notes.txt"
    async with (
        served(tmp_path, llm=ScriptedLLM(script)) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = (await client.post("/session", json={})).json()["id"]
        first = await _prompt(client, sid, "write it")
        second = await _prompt(client, sid, "edit it")

        # To a part: the edit's tool part; its message stays, the edit is undone.
        items = await _messages(client, sid)
        step = next(
            i for i in items
            if any(p["type"] == "tool" and p["tool"] == "edit" for p in i["parts"])
        )  # fmt: skip
        tool = next(p for p in step["parts"] if p["type"] == "tool")
        r = await client.post(
            f"/session/{sid}/revert", json={"messageID": step["info"]["id"], "partID": tool["id"]}
        )
        assert r.status_code == 200, r.text
        assert_valid(r.json(), response_schema("/session/{sessionID}/revert", "post", 200))
        assert r.json()["revert"] == {"messageID": step["info"]["id"], "partID": tool["id"]}
        assert notes.read_text() == "v1\n"
        shown = [m["info"]["id"] for m in await _messages(client, sid)]
        assert shown[-1] == step["info"]["id"] and len(shown) == 5
        assert (await client.post(f"/session/{sid}/unrevert")).status_code == 200
        assert notes.read_text() == "v2\n"

        base = f"/api/session/{sid}/revert"
        r = await client.post(f"{base}/stage", json={"messageID": second, "files": False})
        assert r.status_code == 200, r.text
        assert_valid(
            r.json(), response_schema("/api/session/{sessionID}/revert/stage", "post", 200)
        )
        assert r.json()["data"] == {"messageID": second, "files": []}
        assert notes.read_text() == "v2\n"  # history only
        r = await client.post(f"{base}/stage", json={"messageID": first})
        state = r.json()["data"]
        assert state["messageID"] == first and notes.exists() is False
        assert [(f["path"], f["status"]) for f in state["files"]] == [("notes.txt", "deleted")]
        assert state["files"][0]["deletions"] == 1 and "-v2" in state["files"][0]["patch"]
        r = await client.post(f"{base}/clear")
        assert r.status_code == 204 and notes.read_text() == "v2\n"
        assert len(await _messages(client, sid)) == 6  # two prompts, a tool step and an answer each

        r = await client.post(f"{base}/stage", json={"messageID": second})
        assert notes.read_text() == "v1\n"
        r = await client.post(f"{base}/commit")
        assert r.status_code == 204
        assert len(await _messages(client, sid)) == 3
        r = await client.post(f"{base}/clear")  # committed: nothing to bring back
        assert r.status_code == 204 and notes.read_text() == "v1\n"
        assert len(await _messages(client, sid)) == 3

        for body, status, tag in (
            ({}, 400, "InvalidRequestError"),
            ({"messageID": "msg_nothere"}, 404, "MessageNotFoundError"),
            ({"messageID": "not an id"}, 400, "InvalidRequestError"),
            ({"messageID": first, "partID": "prt_other_0001"}, 400, "InvalidRequestError"),
            ({"messageID": second}, 404, "MessageNotFoundError"),  # dropped for good
            ({"messageID": first, "extra": 1}, 400, "InvalidRequestError"),
        ):
            r = await client.post(f"/session/{sid}/revert", json=body)
            assert (r.status_code, r.json()["_tag"]) == (status, tag), body
            assert r.json()["message"]
        r = await client.post("/session/ses_nothere/revert", json={"messageID": first})
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"

        # busy: a running shell call; refused with a clear error, then abort
        r = await client.post(
            f"/session/{sid}/prompt_async", json={"parts": [{"type": "text", "text": "be slow"}]}
        )
        assert r.status_code == 204
        r = await client.post(f"/session/{sid}/revert", json={"messageID": first})
        assert r.status_code == 409 and r.json()["_tag"] == "SessionBusyError"
        assert r.json()["sessionID"] == sid
        assert (await client.post(f"/session/{sid}/abort")).status_code == 200
        await g.rt.sessions.wait_idle(sid)
        body = await _revert(client, sid, first)
        assert body["revert"]["messageID"] == first and not notes.exists()
