"""OpenCode's V1 events on a served runtime (real Hypercorn, real HTTP clients): part ids,
todo, question, retry and diff events, each validated against OpenCode's schemas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from gateway.http._opencode import tool_state_json
from runtime import ModelRef
from runtime import messages as msg
from runtime.events import ToolTextContent
from runtime.history import lower_message
from runtime.llm import (
    LLMEvent,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallPart,
    Usage,
)

from .conftest import assert_valid, response_schema, served
from .v1 import v1_stream


async def _session(client: httpx.AsyncClient) -> str:
    r = await client.post("/session", json={"title": "v1"})
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


async def _prompt(client: httpx.AsyncClient, sid: str, text: str = "go") -> dict[str, Any]:
    body = {"agent": "build", "parts": [{"type": "text", "text": text}]}
    r = await client.post(f"/session/{sid}/message", json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert_valid(r.json(), response_schema("/session/{sessionID}/message", "post", 200))
    return dict(r.json())


async def test_a_silent_part_before_a_streaming_one_keeps_its_place(tmp_path: Any) -> None:
    """The text part starts first but streams its first delta after the reasoning's: its
    id is still the first, in the events as in the message list."""
    script = [
        StepStart(),
        TextStart(id="t1"),
        ReasoningStart(id="r1"),
        ReasoningDelta(id="r1", delta="thinking"),
        TextDelta(id="t1", delta="hello"),
        ReasoningEnd(id="r1"),
        TextEnd(id="t1"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ]
    async with served(tmp_path, llm=ScriptedLLM([script])) as g:
        async with httpx.AsyncClient(base_url=g.url) as client, v1_stream(g.url) as events:
            sid = await _session(client)
            await _prompt(client, sid)
            listed = (await client.get(f"/session/{sid}/message")).json()
            await events.until(
                lambda p: (
                    p["type"] == "session.status"
                    and p["properties"] == {"sessionID": sid, "status": {"type": "idle"}}
                )
            )
    reply = listed[-1]["parts"]
    assert [p["type"] for p in reply] == ["step-start", "text", "reasoning", "step-finish"]
    ids = [p["id"] for p in reply]
    assert ids == sorted(ids)
    announced = events.parts(sid)
    for part in reply:
        assert announced[part["id"]]["type"] == part["type"]
    assert announced[ids[1]]["text"] == "hello"
    assert announced[ids[2]]["text"] == "thinking"
    deltas = {d["properties"]["partID"]: d["properties"]["delta"]
              for d in events.of("message.part.delta", sid)}  # fmt: skip
    assert deltas == {ids[1]: "hello", ids[2]: "thinking"}


def _call(call_id: str, name: str, data: dict[str, Any]) -> list[LLMEvent]:
    return [
        StepStart(),
        ToolCall(call_id=call_id, name=name, input=data),
        StepFinish(finish_reason="tool-calls", usage=Usage()),
    ]


def _said(text: str) -> list[LLMEvent]:
    return [
        StepStart(), TextStart(id="t"), TextDelta(id="t", delta=text), TextEnd(id="t"),
        StepFinish(finish_reason="stop", usage=Usage()),
    ]  # fmt: skip


async def test_todo_and_question_events_reach_the_v1_streams(tmp_path: Any) -> None:
    todos = [{"content": "write tests", "status": "in_progress", "priority": "high"}]
    question = {
        "question": "Which color?", "header": "Color",
        "options": [{"label": "Red", "description": "warm"}],
    }  # fmt: skip
    llm = ScriptedLLM([
        _call("c1", "todowrite", {"todos": todos}),
        _call("c2", "question", {"questions": [question]}),
        _call("c3", "question", {"questions": [question]}),
        _said("done"),
    ])  # fmt: skip
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url, "/global/event") as events:
            sid = await _session(client)
            body = {"agent": "build", "parts": [{"type": "text", "text": "go"}]}
            r = await client.post(f"/session/{sid}/prompt_async", json=body)
            assert r.status_code == 204, r.text
            asked = await events.until(lambda p: p["type"] == "question.asked")
            request_id = asked["properties"]["id"]
            assert asked["properties"]["tool"]["callID"] == "c2"
            r = await client.post(f"/question/{request_id}/reply", json={"answers": [["Red"]]})
            assert r.status_code == 200 and r.json() is True
            await events.until(lambda p: p["type"] == "question.replied")
            second = await events.until(
                lambda p: p["type"] == "question.asked" and p["properties"]["id"] != request_id
            )
            r = await client.post(f"/question/{second['properties']['id']}/reject")
            assert r.status_code == 200
            await events.until(lambda p: p["type"] == "question.rejected")
            await events.until(
                lambda p: (
                    p["type"] == "session.status"
                    and p["properties"] == {"sessionID": sid, "status": {"type": "idle"}}
                )
            )
    [updated] = events.of("todo.updated", sid)
    assert updated["properties"]["todos"] == todos
    [replied] = events.of("question.replied", sid)
    assert replied["properties"] == {"sessionID": sid, "requestID": request_id,
                                     "answers": [["Red"]]}  # fmt: skip


async def test_session_diff_lists_what_the_file_tools_changed(tmp_path: Any) -> None:
    llm = ScriptedLLM([
        _call("c1", "write", {"filePath": "notes.txt", "content": "one\ntwo\n"}),
        _said("written"),
    ])  # fmt: skip
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url) as events:
            sid = await _session(client)
            assert (await client.get(f"/session/{sid}/diff")).json() == []
            await _prompt(client, sid)
            diffed = await events.until(lambda p: p["type"] == "session.diff")
        r = await client.get(f"/session/{sid}/diff")
        assert_valid(r.json(), response_schema("/session/{sessionID}/diff", "get", 200))
        [changed] = r.json()
        assert changed["file"] == "notes.txt" and changed["status"] == "added"
        assert (changed["additions"], changed["deletions"]) == (2, 0)
        assert "+two" in changed["patch"]
        assert diffed["properties"]["diff"] == r.json()
        (tmp_path / "notes.txt").unlink()  # the file is gone again: nothing differs
        assert (await client.get(f"/session/{sid}/diff")).json() == []


async def test_file_and_shell_parts_carry_the_metadata_opencodes_ui_draws(tmp_path: Any) -> None:
    llm = ScriptedLLM([
        _call("c1", "write", {"filePath": "notes.txt", "content": "one\ntwo\n"}),
        _call("c2", "edit", {"filePath": "notes.txt", "oldString": "two", "newString": "2"}),
        _call("c3", "shell", {"command": "echo hi", "description": "Says hi"}),
        _said("done"),
    ])  # fmt: skip
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url) as events:
            sid = await _session(client)
            await _prompt(client, sid)
            listed = (await client.get(f"/session/{sid}/message")).json()
    parts = [p for m in listed for p in m["parts"] if p["type"] == "tool"]
    states = {p["callID"]: p["state"] for p in parts}
    notes = str(tmp_path / "notes.txt")
    assert states["c1"]["metadata"] == {
        "path": "notes.txt", "bytes": 8, "created": True,
        "filepath": notes, "exists": False, "diagnostics": {},
    }  # fmt: skip
    patch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    assert states["c2"]["metadata"] == {
        "path": "notes.txt", "replacements": 1, "diff": patch, "filepath": notes,
        "filediff": {"file": notes, "patch": patch, "additions": 1, "deletions": 1},
        "diagnostics": {},
    }  # fmt: skip
    shell = states["c3"]["metadata"]
    assert (shell["output"], shell["description"]) == ("hi\n[exit code 0]", "Says hi")
    announced = events.parts(sid)  # the events say what the message list says
    assert [announced[p["id"]]["state"] for p in parts] == [p["state"] for p in parts]


def test_a_call_stored_with_the_old_input_names_shows_opencodes() -> None:
    """Calls stored before the tools took OpenCode's input names keep theirs: shown as
    OpenCode's, and sent to the model as they were made."""
    stored = {"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": True}
    tool = msg.AssistantTool(
        id="c1", name="edit", time=msg.ToolTime(created=1),
        state=msg.ToolCompleted(
            input=stored, content=[ToolTextContent(text="Edited a.txt: 2 replacement(s)")],
            structured={"path": "a.txt", "replacements": 2},
        ),
    )  # fmt: skip
    model = ModelRef(id="m1", provider_id="local")
    message = msg.AssistantMessage(
        id="msg_1", time=msg.MessageTime(created=1), agent="build", model=model, content=[tool]
    )
    [call, _result] = lower_message(message, model)
    assert isinstance(call.content[0], ToolCallPart) and call.content[0].input == stored
    state = tool_state_json(tool, 1, "/work")
    assert state["input"] == {
        "filePath": "a.txt",
        "oldString": "x",
        "newString": "y",
        "replaceAll": True,
    }
    assert state["metadata"] == {
        "path": "a.txt",
        "replacements": 2,
        "filepath": "/work/a.txt",
        "diagnostics": {},
    }


async def test_a_running_shell_call_streams_its_output_into_metadata(tmp_path: Any) -> None:
    command = "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second"
    llm = ScriptedLLM([_call("c1", "shell", {"command": command}), _said("ran")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url) as events:
            sid = await _session(client)
            body = {"agent": "build", "parts": [{"type": "text", "text": "go"}]}
            r = await client.post(f"/session/{sid}/prompt_async", json=body)
            assert r.status_code == 204, r.text

            def shows(text: str, status: str) -> Callable[[dict[str, Any]], bool]:
                def test(p: dict[str, Any]) -> bool:
                    part = p["properties"].get("part", {})
                    state = part.get("state", {})
                    return (
                        p["type"] == "message.part.updated" and part.get("tool") == "bash"
                        and state.get("status") == status
                        and text in state.get("metadata", {}).get("output", "")
                    )  # fmt: skip

                return test

            running = await events.until(shows("first", "running"))
            assert "second" not in running["properties"]["part"]["state"]["metadata"]["output"]
            (tmp_path / "go").touch()  # the command ends only now
            done = await events.until(shows("second", "completed"))
    assert done["properties"]["part"]["id"] == running["properties"]["part"]["id"]


def _in_opencodes_order(nexts: list[dict[str, Any]]) -> None:
    """A V2 consumer's checks on ``session.next.*`` payloads: a prompt is admitted before it
    is promoted (``prompted``); each step starts before anything of it and ends after
    everything; each part starts once, before its deltas, and ends after them."""
    kinds = [p["type"] for p in nexts]
    assert kinds.index("session.next.prompt.admitted") < kinds.index("session.next.prompted")
    steps: dict[str, list[dict[str, Any]]] = {}
    for payload in nexts:
        mid = payload["properties"].get("assistantMessageID")
        if mid is not None:
            steps.setdefault(mid, []).append(payload)
    assert len(steps) == 2
    for events in steps.values():
        names = [p["type"].removeprefix("session.next.") for p in events]
        assert names[0] == "step.started" and names[-1] == "step.ended", names
        assert names.count("step.started") == 1 and names.count("step.ended") == 1
        for kind, key in (("text", "textID"), ("reasoning", "reasoningID")):
            ids = {p["properties"][key] for p in events if key in p["properties"]}
            for part in ids:
                mine = [n for n, p in zip(names, events, strict=True)
                        if p["properties"].get(key) == part]  # fmt: skip
                assert mine[0] == f"{kind}.started" and mine[-1] == f"{kind}.ended", mine
                assert mine.count(f"{kind}.started") == 1 and f"{kind}.delta" in mine


async def test_event_carries_opencodes_v2_events_in_order_beside_the_v1_ones(
    tmp_path: Any,
) -> None:
    """OpenCode's ``/event`` (and ``/global/event``) carries its V2 events as well as the V1
    ones; each frame is validated against its OpenAPI document as it arrives (``v1_stream``).
    """
    (tmp_path / "notes.txt").write_text("a note\n")
    first = [
        StepStart(),
        ReasoningStart(id="r1"),
        ReasoningDelta(id="r1", delta="thinking"),
        TextStart(id="t1"),
        TextDelta(id="t1", delta="let me "),
        ReasoningEnd(id="r1"),
        TextDelta(id="t1", delta="read it"),
        TextEnd(id="t1"),
        ToolCall(call_id="c1", name="read", input={"filePath": "notes.txt"}),
        StepFinish(finish_reason="tool-calls", usage=Usage(input_tokens=3, output_tokens=2)),
    ]
    llm = ScriptedLLM([first, _said("it says a note")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url) as flat, v1_stream(g.url, "/global/event") as wrapped:
            sid = await _session(client)
            reply = await _prompt(client, sid, "read the notes")
            for events in (flat, wrapped):
                await events.until(
                    lambda p: (
                        p["type"] == "session.status"
                        and p["properties"] == {"sessionID": sid, "status": {"type": "idle"}}
                    )
                )
    for events in (flat, wrapped):
        mine = [p for p in events.payloads if p["properties"].get("sessionID") == sid
                or p["properties"].get("part", {}).get("sessionID") == sid]  # fmt: skip
        kinds = [p["type"] for p in mine]
        nexts = [p for p in mine if p["type"].startswith("session.next.")]
        assert {"session.next.tool.called", "session.next.tool.success"} <= set(kinds)
        _in_opencodes_order(nexts)
        # ... beside the V1 projection, each V2 event before what is projected from it
        assert {"message.updated", "message.part.updated", "message.part.delta"} <= set(kinds)
        user = next(
            i for i, p in enumerate(mine)
            if p["type"] == "message.updated" and p["properties"]["info"]["role"] == "user"
        )  # fmt: skip
        assert kinds.index("session.next.prompted") < user
        for step in {
            p["properties"]["assistantMessageID"]
            for p in nexts
            if "assistantMessageID" in p["properties"]
        }:
            started = next(
                i for i, p in enumerate(mine) if p["type"] == "session.next.step.started"
                and p["properties"]["assistantMessageID"] == step
            )  # fmt: skip
            opened = next(
                i for i, p in enumerate(mine) if p["type"] == "message.updated"
                and p["properties"]["info"]["id"] == step
            )  # fmt: skip
            assert started < opened
        assert reply["info"]["id"] in {p["properties"].get("assistantMessageID") for p in nexts}
        texts = [p["properties"]["delta"] for p in nexts if p["type"].endswith("text.delta")]
        assert texts == ["let me ", "read it", "it says a note"]
