"""``wait_idle`` has one path: it registers with the session's actor against its
mailbox's sequence numbers. These tests hold it to the races that path must get right."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.session._session_messages import Wake
from runtime import llm
from storage import PendingInputs
from tests.execution.conftest import GatedLLM, answer, prompt, running, user_texts


async def test_a_prompt_whose_wake_is_still_queued_is_waited_for(tmp_path: Path) -> None:
    """A wake sent before the wait but not yet handled by the idle actor: the wait
    returns only once the drain it starts has answered the prompt."""
    client = llm.ScriptedLLM([answer("warm"), answer("late")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("warm"))
        await rt.sessions.wait_idle(sid)
        actor = rt.execution.active_sessions()[0]
        receipt = await rt.sessions.prompt(sid, prompt=prompt("late"), resume=False)
        actor.mailbox.send_nowait(Wake(receipt.admitted_seq))
        assert actor.lane.idle  # not handled yet: only the sequence number tells
        await rt.sessions.wait_idle(sid)
        assert [user_texts(r) for r in client.requests] == [["warm"], ["warm", "late"]]
        assert await rt.storage.read(PendingInputs(session_id=sid)) == []
        assert actor.idle


async def test_a_prompt_admitted_by_its_own_id_is_waited_for(tmp_path: Path) -> None:
    """Through the public API: a prompt with a caller's id goes by wake; a wait right
    after it sees its answer, first prompt (actor activating) and later ones alike."""
    client = llm.ScriptedLLM([answer("one"), answer("two")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        for number, text in enumerate(["one", "two"]):
            await rt.sessions.prompt(sid, prompt=prompt(text), id=f"msg_idle{number:021d}")
            await rt.sessions.wait_idle(sid)
            assert len(client.requests) == number + 1
            assert await rt.storage.read(PendingInputs(session_id=sid)) == []


@asynccontextmanager
async def held_turn(tmp_path: Path) -> AsyncIterator[tuple[Any, GatedLLM]]:
    """A runtime whose session's first provider turn is held mid-stream until
    ``client.gates.open("turn")``."""
    client = GatedLLM([answer("held")], holds={0: "turn"})
    async with running(tmp_path, client) as rt:
        await rt.sessions.prompt(rt.test_session, prompt=prompt("start"))
        await client.in_stream.wait()
        yield rt, client


async def wait_then_set(rt: Any, done: trio.Event) -> None:
    await rt.sessions.wait_idle(rt.test_session)
    done.set()


async def test_a_wait_begun_while_draining_returns_when_the_drain_ends(tmp_path: Path) -> None:
    async with held_turn(tmp_path) as (rt, client):
        sid, returned = rt.test_session, trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_then_set, rt, returned)
            await trio.testing.wait_all_tasks_blocked()
            assert not returned.is_set()
            client.gates.open("turn")
            with trio.fail_after(10):
                await returned.wait()
        actor = rt.execution.active_sessions()[0]
        assert actor.idle
        kinds = [type(x).__name__ for x in await rt.sessions.context(sid)]
        assert kinds == ["UserMessage", "AssistantMessage"]


async def test_a_wait_on_an_idle_or_inactive_session_answers_at_once(tmp_path: Path) -> None:
    """No message, no scheduling round: the idle actor's counters answer the wait."""
    client = llm.ScriptedLLM([answer()])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        with trio.testing.assert_no_checkpoints():
            await rt.sessions.wait_idle(sid)  # never activated
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        actor = rt.execution.active_sessions()[0]
        mailed = actor.mailbox.sent
        with trio.testing.assert_no_checkpoints():
            await rt.sessions.wait_idle(sid)
        assert actor.mailbox.sent == mailed


async def test_a_cancelled_wait_leaves_the_drain_and_other_waits_alone(tmp_path: Path) -> None:
    async with held_turn(tmp_path) as (rt, client):
        sid, kept = rt.test_session, trio.Event()
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as cancelled:
                nursery.start_soon(wait_then_set, rt, kept)
                cancelled.deadline = trio.current_time()  # this wait is cancelled
                await rt.sessions.wait_idle(sid)
            assert cancelled.cancelled_caught
            await trio.testing.wait_all_tasks_blocked()
            assert not kept.is_set()
            client.gates.open("turn")
            with trio.fail_after(10):
                await kept.wait()
        assert len(client.requests) == 1
        assert await rt.execution.passivate_idle(older_than=0) == 1


async def test_a_wait_goes_on_when_passivation_races_a_queued_wake(tmp_path: Path) -> None:
    """A wake handed to the idle actor's receive is not in its mailbox's buffer, so the
    actor may be passivated before it handles it; the wait registered meanwhile is failed
    as passivated, the actor is started again for the wake, and the wait goes on with it
    until the prompt is answered."""
    client = llm.ScriptedLLM([answer("warm"), answer("late")])
    async with running(tmp_path, client) as rt:
        sid, done = rt.test_session, trio.Event()
        await rt.sessions.prompt(sid, prompt=prompt("warm"))
        await rt.sessions.wait_idle(sid)
        [actor] = rt.execution.active_sessions()
        receipt = await rt.sessions.prompt(sid, prompt=prompt("late"), resume=False)
        async with trio.open_nursery() as nursery:
            actor.mailbox.send_nowait(Wake(receipt.admitted_seq))
            nursery.start_soon(wait_then_set, rt, done)
            assert await rt.execution.passivate_idle(older_than=0) == 1
            with trio.fail_after(10):
                await done.wait()
        assert [user_texts(r) for r in client.requests] == [["warm"], ["warm", "late"]]
        assert await rt.storage.read(PendingInputs(session_id=sid)) == []
        assert rt.execution.active_sessions() == [actor] and actor.idle
