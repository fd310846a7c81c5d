"""The assistant message being written, in OpenCode's V1 message routes (real Hypercorn, real
HTTP clients): a session's list holds it with the ids the V1 events announced, and equals
the stored one once the step ends; every answer and event validated against OpenCode's
schemas. Also ``LiveAnswers``' bounds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
import trio

from gateway.opencode._transcript import transcript
from gateway.opencode._v1_live import LiveAnswers
from runtime import events as ev
from runtime.llm import (
    LLMEvent,
    LLMRequest,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    Usage,
)

from .conftest import assert_valid, response_schema, served
from .v1 import V1Stream, v1_stream


class HeldLLM:
    """A scripted provider (one script per call) whose first answer stops after
    *hold_after* events until ``release`` is set (``holding`` says it got there)."""

    def __init__(self, scripts: Sequence[Sequence[LLMEvent]], *, hold_after: int) -> None:
        self.scripts = scripts
        self.hold_after = hold_after
        self.holding = trio.Event()
        self.release = trio.Event()
        self.requests: list[LLMRequest] = []

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        first = not self.requests
        self.requests.append(request)
        for n, event in enumerate(self.scripts[len(self.requests) - 1]):
            if first and n == self.hold_after:
                self.holding.set()
                await self.release.wait()
            await trio.lowlevel.checkpoint()
            yield event


_DONE = StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2))


async def _listed(client: httpx.AsyncClient, sid: str, query: str = "") -> list[dict[str, Any]]:
    r = await client.get(f"/session/{sid}/message{query}")
    assert r.status_code == 200, r.text
    assert_valid(r.json(), response_schema("/session/{sessionID}/message", "get", 200))
    return list(r.json())


async def _start(client: httpx.AsyncClient) -> str:
    r = await client.post("/session", json={"title": "live"})
    assert r.status_code == 200, r.text
    sid = str(r.json()["id"])
    body = {"agent": "build", "parts": [{"type": "text", "text": "go"}]}
    r = await client.post(f"/session/{sid}/prompt_async", json=body)
    assert r.status_code == 204, r.text
    return sid


async def _idle(events: V1Stream, sid: str) -> None:
    idle = {"sessionID": sid, "status": {"type": "idle"}}
    await events.until(lambda p: p["type"] == "session.status" and p["properties"] == idle)


def _ids(item: dict[str, Any]) -> list[str]:
    return [p["id"] for p in item["parts"]]


async def test_a_new_sessions_first_answer_is_listed_while_it_streams(tmp_path: Any) -> None:
    script = [StepStart(), TextStart(id="t1"), TextDelta(id="t1", delta="Hel"),
              TextDelta(id="t1", delta="lo"), TextEnd(id="t1"), _DONE]  # fmt: skip
    llm = HeldLLM([script], hold_after=3)
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url) as events:
            sid = await _start(client)
            delta = await events.until(lambda p: p["type"] == "message.part.delta")
            mid, pid = delta["properties"]["messageID"], delta["properties"]["partID"]
            listed = await _listed(client, sid)
            assert [i["info"]["role"] for i in listed] == ["user", "assistant"]
            live = listed[-1]
            assert live["info"]["id"] == mid
            assert live["info"]["parentID"] == listed[0]["info"]["id"]
            assert "completed" not in live["info"]["time"]
            assert [p["type"] for p in live["parts"]] == ["step-start", "text"]
            announced = [i for i, p in events.parts(sid).items() if p["messageID"] == mid]
            assert _ids(live) == announced == [_ids(live)[0], pid]
            assert live["parts"][1]["text"] == "Hel"
            assert "end" not in live["parts"][1]["time"]
            assert await _listed(client, sid, "?limit=1") == [live]
            one = await client.get(f"/session/{sid}/message/{mid}")
            assert one.status_code == 200, one.text
            assert_valid(one.json(), response_schema("/session/{sessionID}/message/{messageID}",
                                                     "get", 200))  # fmt: skip
            assert one.json() == live
            llm.release.set()
            await _idle(events, sid)
            after = await _listed(client, sid)
            durable = await transcript(g.rt, sid, limit=100)  # what the store alone holds
    assert [i["info"]["id"] for i in after] == [listed[0]["info"]["id"], mid]
    assert _ids(after[-1])[:2] == _ids(live)
    assert [p["type"] for p in after[-1]["parts"]] == ["step-start", "text", "step-finish"]
    assert after[-1]["parts"][1]["text"] == "Hello"
    assert after == durable
    deltas = [d["properties"] for d in events.of("message.part.delta", sid)]
    assert {(d["messageID"], d["partID"]) for d in deltas} == {(mid, pid)}
    assert "".join(d["delta"] for d in deltas) == "Hello"


async def test_part_ids_sort_in_creation_order_in_the_list_and_the_events(tmp_path: Any) -> None:
    """Reasoning, text, a tool call (written to the store at once) and text after it: while
    the step runs the list merges the stored parts with the streamed ones; each id is the
    one the events gave, in creation order, before and after the step ends."""
    todos = [{"content": "list", "status": "pending", "priority": "low"}]
    script = [
        StepStart(), ReasoningStart(id="r1"), ReasoningDelta(id="r1", delta="hmm"),
        TextStart(id="t1"), TextDelta(id="t1", delta="first"),
        ToolCall(call_id="c1", name="todowrite", input={"todos": todos}),
        TextStart(id="t2"), TextDelta(id="t2", delta="then"),
        TextEnd(id="t2"), ReasoningEnd(id="r1"), TextEnd(id="t1"),
        StepFinish(finish_reason="tool-calls", usage=Usage()),
    ]  # fmt: skip
    after_tool = [StepStart(), TextStart(id="t"), TextDelta(id="t", delta="ok"), TextEnd(id="t"),
                  _DONE]  # fmt: skip
    llm = HeldLLM([script, after_tool], hold_after=8)
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with v1_stream(g.url, "/global/event") as events:
            sid = await _start(client)
            await events.until(
                lambda p: p["type"] == "message.part.delta" and p["properties"]["delta"] == "then"
            )
            await events.until(
                lambda p: (
                    p["type"] == "message.part.updated"
                    and p["properties"]["part"]["type"] == "tool"
                    and p["properties"]["part"]["state"]["status"] == "completed"
                )
            )
            listed = await _listed(client, sid)
            partial = (await transcript(g.rt, sid, limit=100))[-1]  # the call's write
            llm.release.set()
            await _idle(events, sid)
            after = await _listed(client, sid)
            assert after == await transcript(g.rt, sid, limit=100)
    live = listed[-1]
    assert partial["info"]["id"] == live["info"]["id"]
    assert [p.get("text") for p in partial["parts"]] == [None, "", "", None]
    assert [p["type"] for p in live["parts"]] == ["step-start", "reasoning", "text", "tool", "text"]
    assert [p.get("text") for p in live["parts"]] == [None, "hmm", "first", None, "then"]
    assert live["parts"][3]["state"]["status"] == "completed"
    ids = _ids(live)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    announced = events.parts(sid)
    mine = [i for i, p in announced.items() if p["messageID"] == live["info"]["id"]]
    assert mine == [*ids, after[1]["parts"][-1]["id"]]
    for part in live["parts"]:
        assert announced[part["id"]]["type"] == part["type"]
    stepped = after[1]
    assert stepped["info"]["id"] == live["info"]["id"]
    assert _ids(stepped) == [*ids, _ids(stepped)[-1]] and _ids(stepped) == sorted(_ids(stepped))
    assert stepped["parts"][-1]["type"] == "step-finish"
    assert [i["info"]["role"] for i in after] == ["user", "assistant", "assistant"]
    assert len({i["info"]["id"] for i in after}) == 3


def _text(mid: str, sid: str, key: str, delta: str) -> ev.TextDelta:
    return ev.TextDelta(
        timestamp=1, session_id=sid, assistant_message_id=mid, text_id=key, delta=delta
    )


def test_live_answers_hold_within_their_bounds() -> None:
    live = LiveAnswers(max_sessions=2, max_parts=2, max_text=5, max_numbered=3)
    for key in ("a", "b", "c"):
        live.feed(_text("msg_1", "s1", key, "0123456789"))
    held = live.held("s1")
    assert held is not None
    assert [(index, item.text) for index, _, _, item in held.parts] == [(1, "01234"), (2, "01234")]
    assert live.index("msg_1", "c") == 3  # numbered though not held
    live.feed(_text("msg_2", "s2", "a", "x"))
    live.feed(_text("msg_3", "s3", "a", "y"))
    assert live.held("s1") is None and live.held("s3") is not None  # least recently changed
    live.feed(_text("msg_4", "s3", "a", "z"))  # a newer step replaces the session's older one
    assert live.held("s3") is not None and live.held("s3").message_id == "msg_4"  # type: ignore[union-attr]
    assert not live.knows("msg_1")  # past max_numbered
    live.idle("s3")
    assert live.held("s3") is None
    with pytest.raises(ValueError):
        LiveAnswers(max_parts=0)
