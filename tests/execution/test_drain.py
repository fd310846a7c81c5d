"""The drain loop against a real runtime: promotion, steering, queueing, tools, interrupts."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from actors.session._session_messages import Wake
from runtime import AssistantMessage, llm
from runtime import messages as m
from storage import PendingInputs, StoredEvent
from tests.execution.conftest import (
    GatedLLM,
    answer,
    eventually,
    prompt,
    roles,
    running,
    tool_calls,
    user_texts,
)


async def test_two_prompts_admitted_before_the_drain_go_out_as_one_request(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer()])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"), resume=False)
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 1
        assert user_texts(client.requests[0]) == ["one", "two"]
        kinds = [type(x).__name__ for x in await rt.sessions.context(sid)]
        assert kinds == ["UserMessage", "UserMessage", "AssistantMessage"]


async def test_a_steer_admitted_mid_turn_joins_the_next_request_of_the_same_drain(
    tmp_path: Path,
) -> None:
    client = GatedLLM([answer("first"), answer("second")], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("start"))
        await client.in_stream.wait()
        await rt.sessions.prompt(sid, prompt=prompt("steer"))
        client.gates.open("turn")
        await rt.sessions.wait_idle(sid)
        assert [user_texts(r) for r in client.requests] == [["start"], ["start", "steer"]]
        actor = rt.execution.active_sessions()[0]
        assert actor.lane.drains == 2  # the drain plus one follow-up that found nothing


async def test_two_steers_mid_turn_give_one_continuation(tmp_path: Path) -> None:
    client = GatedLLM([answer(), answer()], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("start"))
        await client.in_stream.wait()
        await rt.sessions.prompt(sid, prompt=prompt("a"))
        await rt.sessions.prompt(sid, prompt=prompt("b"))
        client.gates.open("turn")
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 2
        assert user_texts(client.requests[1]) == ["start", "a", "b"]


async def test_a_queued_prompt_mid_turn_runs_as_its_own_activity(tmp_path: Path) -> None:
    client = GatedLLM([answer("first"), answer("second")], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("start"))
        await client.in_stream.wait()
        await rt.sessions.prompt(sid, prompt=prompt("later"), delivery="queue")
        client.gates.open("turn")
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 2
        assert roles(client.requests[1]) == ["UserMessage", "AssistantMessage", "UserMessage"]
        assert user_texts(client.requests[1]) == ["start", "later"]


async def test_three_queued_prompts_give_three_activities_in_fifo_order(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer("1"), answer("2"), answer("3")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        for text in ("q1", "q2"):
            await rt.sessions.prompt(sid, prompt=prompt(text), delivery="queue", resume=False)
        await rt.sessions.prompt(sid, prompt=prompt("q3"), delivery="queue")
        await rt.sessions.wait_idle(sid)
        assert [user_texts(r) for r in client.requests] == [
            ["q1"],
            ["q1", "q2"],
            ["q1", "q2", "q3"],
        ]


async def test_three_wakes_during_a_drain_give_exactly_one_follow_up(tmp_path: Path) -> None:
    client = GatedLLM([answer(), answer()], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("start"))
        await client.in_stream.wait()
        for text in ("w1", "w2", "w3"):
            await rt.sessions.prompt(sid, prompt=prompt(text))
        client.gates.open("turn")
        await rt.sessions.wait_idle(sid)
        actor = rt.execution.active_sessions()[0]
        assert actor.lane.drains == 2
        assert len(client.requests) == 2


async def test_interrupting_an_idle_or_unknown_session_returns_at_once(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer()])
    async with running(tmp_path, client) as rt:
        with trio.fail_after(2):
            await rt.sessions.interrupt(rt.test_session)
            await rt.sessions.interrupt("ses_unknown")
        assert client.requests == []


TOOL_ENDED = {"session.next.tool.success", "session.next.tool.failed"}


async def test_five_tool_calls_run_concurrently_and_the_continuation_waits_for_all(
    tmp_path: Path,
) -> None:
    calls = [(f"c{i}", "gated", {"key": f"g{i}"}) for i in range(5)]
    client = llm.ScriptedLLM([tool_calls(*calls), answer("after tools")])
    async with running(tmp_path, client) as rt:
        sid, gates = rt.test_session, rt.test_gates
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await eventually(lambda: len(gates.started) == 5)
        assert sorted(gates.started) == [f"g{i}" for i in range(5)]
        with rt.hub.subscribe(sid) as sub:
            for i in range(4):
                gates.open(f"g{i}")
            finished = 0
            with trio.fail_after(10):  # the four results are stored and published
                while finished < 4:
                    item = await sub.receive()
                    finished += isinstance(item, StoredEvent) and item.type in TOOL_ENDED
        await trio.testing.wait_all_tasks_blocked()
        assert len(client.requests) == 1
        gates.open("g4")
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 2
        results = [x for x in client.requests[1].messages if isinstance(x, llm.ToolMessage)]
        assert len(results) == 1 and len(results[0].content) == 5


async def test_interrupt_during_the_stream_keeps_inbox_rows_and_resume_continues(
    tmp_path: Path,
) -> None:
    client = GatedLLM([answer("never"), answer("resumed")], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("start"))
        await client.in_stream.wait()
        await rt.sessions.prompt(sid, prompt=prompt("queued"), delivery="queue", resume=False)
        with trio.fail_after(5):
            await rt.sessions.interrupt(sid)
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        assert [row.prompt.text for row in pending] == ["queued"]
        context = await rt.sessions.context(sid)
        assistant = [x for x in context if isinstance(x, AssistantMessage)]
        assert assistant and assistant[-1].finish == "interrupted"


async def test_interrupt_during_tool_settlement_fails_the_tool_and_resume_sends_it(
    tmp_path: Path,
) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "gated", {"key": "never"})), answer("ok")])
    async with running(tmp_path, client) as rt:
        sid, gates = rt.test_session, rt.test_gates
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await eventually(lambda: bool(gates.started))
        with trio.fail_after(5):
            await rt.sessions.interrupt(sid)
        context = await rt.sessions.context(sid)
        tool = next(
            part
            for x in context
            if isinstance(x, AssistantMessage)
            for part in x.content
            if isinstance(part, m.AssistantTool)
        )
        assert isinstance(tool.state, m.ToolError)
        assert tool.state.error.message == "Tool execution interrupted"
        await rt.sessions.resume(sid)
        assert roles(client.requests[-1]) == ["UserMessage", "AssistantMessage", "ToolMessage"]
        result = client.requests[-1].messages[-1]
        assert isinstance(result, llm.ToolMessage) and result.content[0].is_error


async def test_resume_with_nothing_pending_still_makes_one_provider_attempt(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer("first"), answer("again")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.resume(sid)
        assert len(client.requests) == 2


async def test_a_failing_tool_settles_failed_and_the_model_sees_the_error(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "failing", {"message": "boom"})), answer()])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        result = client.requests[1].messages[-1]
        assert isinstance(result, llm.ToolMessage)
        assert result.content[0].is_error and "boom" in result.content[0].content[0].text


async def test_provider_turns_stop_at_the_limit_when_work_remains(tmp_path: Path) -> None:
    def always_tools(request: llm.LLMRequest) -> list[llm.LLMEvent]:
        return tool_calls((f"c{len(request.messages)}", "echo", {"text": "x"}))

    client = llm.ScriptedLLM(always_tools)
    async with running(tmp_path, client, max_turns=3) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("loop"))
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 3
        assert client.requests[-1].tools == [] and client.requests[-1].tool_choice == "none"
        actor = rt.execution.active_sessions()[0]
        assert actor.last_error is not None and "3 provider turns" in actor.last_error


async def test_steers_at_the_turn_cap_reset_the_allowance_once(tmp_path: Path) -> None:
    # max_turns=2: the second turn is the last of the allowance (no tools). Two steers
    # admitted during it are promoted together at the boundary: a fresh allowance of
    # exactly two turns, not one per steer, and no failure.
    echo = ("echo", {"text": "x"})
    client = GatedLLM(
        [tool_calls(("c1", *echo)), answer("capped"), tool_calls(("c3", *echo)), answer()],
        holds={1: "final"},
    )
    async with running(tmp_path, client, max_turns=2) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("start"))
        await client.in_stream.wait()
        await rt.sessions.prompt(sid, prompt=prompt("a"))
        await rt.sessions.prompt(sid, prompt=prompt("b"))
        client.gates.open("final")
        await rt.sessions.wait_idle(sid)
        offered = [(bool(r.tools), r.tool_choice) for r in client.requests]
        assert offered == [(True, "auto"), (False, "none"), (True, "auto"), (False, "none")]
        assert user_texts(client.requests[2]) == ["start", "a", "b"]
        assert rt.execution.active_sessions()[0].last_error is None


async def test_model_and_agent_switches_apply_to_the_next_turn(tmp_path: Path) -> None:
    from runtime import ModelRef

    client = llm.ScriptedLLM([answer(), answer()])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.switch_model(sid, ModelRef(id="m2", provider_id="p2"))
        await rt.sessions.switch_agent(sid, "plan")
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        assert client.requests[1].model.model_id == "m2"
        context = await rt.sessions.context(sid)
        last = [x for x in context if isinstance(x, AssistantMessage)][-1]
        assert last.agent == "plan" and last.model.id == "m2"


async def test_a_prompt_to_an_idle_ready_session_opens_its_activity_in_the_admitting_batch(
    tmp_path: Path,
) -> None:
    """Once the session's actor is ready, a prompt's admission and the drain's opening
    promotion share one commit; what the request carries is unchanged (pending steers
    admitted earlier come along, in order), and so is the durable record."""
    client = llm.ScriptedLLM([answer("first"), answer("second")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("warm"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(sid, prompt=prompt("a"), resume=False)
        before = rt.storage.batches
        await rt.sessions.prompt(sid, prompt=prompt("b"))
        await rt.sessions.wait_idle(sid)
        assert rt.storage.batches - before == 2  # admission + opening, then the turn
        assert [user_texts(r) for r in client.requests] == [["warm"], ["warm", "a", "b"]]
        assert await rt.storage.read(PendingInputs(session_id=sid)) == []
        kinds = [type(x).__name__ for x in await rt.sessions.context(sid)]
        assert kinds == ["UserMessage", "AssistantMessage", "UserMessage", "UserMessage",
                         "AssistantMessage"]  # fmt: skip


async def test_an_opening_and_an_idle_wait_reach_a_ready_actor_without_messages(
    tmp_path: Path,
) -> None:
    """The admission hands the actor the opened activity and ``wait_idle`` registers with
    it directly: neither sends a message, and the outcome is the one a wake would give.
    A wake queued for the actor ahead of the wait is waited for."""
    client = llm.ScriptedLLM([answer("first"), answer("second"), answer("third")], latency=0.05)
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("warm"))
        await rt.sessions.wait_idle(sid)
        actor = rt.execution.active_sessions()[0]
        mailed = actor.mailbox.statistics().messages_in
        await rt.sessions.prompt(sid, prompt=prompt("direct"))
        assert not actor.idle  # the drain started on the admission's own task
        await rt.sessions.wait_idle(sid)
        assert actor.idle and actor.mailbox.statistics().messages_in == mailed
        assert user_texts(client.requests[1]) == ["warm", "direct"]
        # A wake queued ahead of the wait: the wait sees the drain it starts.
        await rt.sessions.prompt(sid, prompt=prompt("queued"), resume=False)
        actor.mailbox.send_nowait(Wake(1 << 61))
        await rt.sessions.wait_idle(sid)
        assert actor.mailbox.statistics().messages_in == mailed + 1
        assert len(client.requests) == 3 and actor.idle
