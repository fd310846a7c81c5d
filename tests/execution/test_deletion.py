"""Deleting a session removes everything it holds, durably, and stops its actor first."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.kernel._events import DEFAULT_SUBSCRIBER_BUFFER
from runtime import AssistantMessage, Location, ModelRef, SessionNotFoundError, llm
from runtime import events as ev
from storage import Children, EventStore, Footprint, StoredEvent
from tests.execution.conftest import answer, eventually, prompt, running

_CHILD = Path(__file__).with_name("deletion_child.py")


async def _row_counts_of(rt: Any, session_id: str) -> dict[str, int]:
    counts: dict[str, int] = await rt.storage.read(Footprint(session_id=session_id))
    return counts


async def _answered(rt: Any) -> str:
    """The runtime's test session, once it has answered one prompt."""
    await rt.sessions.prompt(rt.test_session, prompt=prompt("hello"))
    await rt.sessions.wait_idle(rt.test_session)
    return str(rt.test_session)


async def test_deletion_removes_every_row_and_leaves_other_sessions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kittiwake.sessions")
    client = llm.ScriptedLLM([answer("one"), answer("two")])
    async with running(tmp_path, client) as rt:
        doomed = rt.test_session
        kept = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        for sid in (doomed, kept):
            await rt.sessions.prompt(sid, prompt=prompt("hello"))
            await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(doomed, prompt=prompt("later"), delivery="queue", resume=False)
        before = await _row_counts_of(rt, doomed)
        assert before["events"] > 4 and before["messages"] >= 2
        assert before["inputs"] == 2 and before["epoch"] == 1

        deleted = await rt.sessions.delete(doomed)

        assert [info.id for info in deleted] == [doomed]
        logged = [r for r in caplog.records if r.getMessage() == "session deleted"]
        assert [r.session for r in logged] == [doomed]  # type: ignore[attr-defined]
        assert set((await _row_counts_of(rt, doomed)).values()) == {0}
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.get(doomed)
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.prompt(doomed, prompt=prompt("anyone?"))
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.messages(doomed)
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.delete(doomed)
        listed = [s.id for s in (await rt.sessions.list()).data]
        assert listed == [kept]
        kept_context = await rt.sessions.context(kept)
        assert [type(m).__name__ for m in kept_context].count("AssistantMessage") == 1
        assert (await _row_counts_of(rt, kept))["messages"] >= 2

    # Reopened: still gone, the other session intact.
    async with running(tmp_path, llm.ScriptedLLM([])) as rt:
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.get(doomed)
        assert set((await _row_counts_of(rt, doomed)).values()) == {0}
        assert len(await rt.sessions.context(kept)) == len(kept_context)


async def test_deletion_cancels_an_active_drain_first(tmp_path: Path) -> None:
    script = [
        [llm.StepStart(), llm.ToolCall(call_id="c1", name="gated", input={"key": "never"})],
        answer("after"),
    ]
    client = llm.ScriptedLLM(script)
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("work"))
        await eventually(lambda: bool(rt.test_gates.started))
        outcomes: dict[str, str] = {}

        async def outcome(name: str, call: Any) -> None:
            try:
                await call(sid)
                outcomes[name] = "returned"
            except SessionNotFoundError:
                outcomes[name] = "not found"

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outcome, "wait", rt.sessions.wait_idle)
                nursery.start_soon(outcome, "resume", rt.sessions.resume)
                await trio.testing.wait_all_tasks_blocked()  # both are waiting on the drain
                await rt.sessions.delete(sid)

        # Callers waiting on the drain learn the session is gone.
        assert outcomes == {"wait": "not found", "resume": "not found"}

        assert set((await _row_counts_of(rt, sid)).values()) == {0}
        assert sid not in [a.session_id for a in rt.execution.active_sessions()]
        # The runtime goes on serving other sessions.
        other = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        await rt.sessions.prompt(other, prompt=prompt("next"))
        with trio.fail_after(10):
            await rt.sessions.wait_idle(other)
        context = await rt.sessions.context(other)
        assert isinstance(context[-1], AssistantMessage)


async def test_subscribers_see_the_deletion(tmp_path: Path) -> None:
    async with running(tmp_path, llm.ScriptedLLM([answer("hi")])) as rt:
        sid = await _answered(rt)
        seen: list[str] = []
        ended = trio.Event()

        async def follow() -> None:
            async for item in rt.sessions.events(sid, after=0):
                seen.append(item.event.__struct_config__.tag)
            ended.set()

        with rt.hub.subscribe(None) as everything:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow)
                await eventually(lambda: "session.next.step.ended" in seen)
                await rt.sessions.delete(sid)
                with trio.fail_after(5):
                    await ended.wait()
            deleted = []
            while True:
                try:
                    item = everything.receive_nowait()
                except trio.WouldBlock:
                    break
                if isinstance(item, StoredEvent) and item.type == "session.deleted":
                    deleted.append(item.aggregate_id)
        assert deleted == [sid]
        assert "session.deleted" not in seen  # the session's own stream ends instead


async def test_an_id_can_be_used_again_after_deletion(tmp_path: Path) -> None:
    async with running(tmp_path, llm.ScriptedLLM([answer("old"), answer("new")])) as rt:
        loc = Location(directory=str(tmp_path))
        await rt.sessions.create(id="ses_again", location=loc, title="first")
        await rt.sessions.prompt("ses_again", prompt=prompt("old"))
        await rt.sessions.wait_idle("ses_again")
        await rt.sessions.delete("ses_again")
        again = await rt.sessions.create(id="ses_again", location=loc, title="second")
        assert again.title == "second"
        assert await rt.sessions.context("ses_again") == []
        await rt.sessions.prompt("ses_again", prompt=prompt("new"))
        await rt.sessions.wait_idle("ses_again")
        texts = [m.text for m in await rt.sessions.context("ses_again") if hasattr(m, "text")]
        assert texts == ["new"]
    async with running(tmp_path, llm.ScriptedLLM([])) as rt:
        assert (await rt.sessions.get("ses_again")).title == "second"
        context = await rt.sessions.context("ses_again")
        assert [m.text for m in context if hasattr(m, "text")] == ["new"]


def _run_child_until_deleted(data: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    child = subprocess.Popen(
        [sys.executable, str(_CHILD), str(data)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if lines[-1] == "DELETED":
            break
    os.kill(child.pid, signal.SIGKILL)  # before the database has the deletion, usually
    child.wait(timeout=10)
    child.stdout.close()
    assert lines == ["DELETED"], lines


async def test_a_deletion_survives_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await trio.to_thread.run_sync(_run_child_until_deleted, data)
    store = await trio.to_thread.run_sync(EventStore.open, data)
    try:
        # rt.sessions.delete ends with a read, which let DuckDB catch up; the bare
        # deletion after it was only in the journal.
        assert store.statistics().recovered_batches == 1
        for gone in ("ses_doomed", "ses_journaled"):
            assert store.get_session(gone) is None
            assert set(store.footprint(gone).values()) == {0}
        kept = store.get_session("ses_kept")
        assert kept is not None
        assert store.footprint("ses_kept")["inputs"] == 1
    finally:
        store.close()


async def test_child_sessions_are_listed_and_deleted_with_their_parent(tmp_path: Path) -> None:
    async with running(tmp_path, llm.ScriptedLLM([answer("child")])) as rt:
        loc = Location(directory=str(tmp_path))
        parent = rt.test_session
        child = await rt.sessions.create(location=loc, parent_id=parent)
        grandchild = await rt.sessions.create(location=loc, parent_id=child.id)
        other = await rt.sessions.create(location=loc)
        assert child.parent_id == parent
        assert [s.id for s in await rt.sessions.children(parent)] == [child.id]
        assert [s.id for s in await rt.sessions.children(child.id)] == [grandchild.id]
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.create(location=loc, parent_id="ses_missing")
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.create(id="ses_self", location=loc, parent_id="ses_self")
        await rt.sessions.prompt(grandchild.id, prompt=prompt("hi"))
        await rt.sessions.wait_idle(grandchild.id)

        deleted = await rt.sessions.delete(parent)
        assert [s.id for s in deleted] == [grandchild.id, child.id, parent]

        for gone in (parent, child.id, grandchild.id):
            with pytest.raises(SessionNotFoundError):
                await rt.sessions.get(gone)
            assert set((await _row_counts_of(rt, gone)).values()) == {0}
        assert [s.id for s in (await rt.sessions.list()).data] == [other.id]


async def test_a_subscriber_that_fell_behind_still_sees_its_stream_end(tmp_path: Path) -> None:
    async with running(tmp_path, llm.ScriptedLLM([answer("hi")])) as rt:
        sid = await _answered(rt)
        seen: list[str] = []
        ended, pull = trio.Event(), trio.Event()

        async def follow() -> None:
            async for item in rt.sessions.events(sid, after=0):
                seen.append(item.event.__struct_config__.tag)
                if seen[-1] == "session.next.step.ended":
                    await pull.wait()  # the generator stays parked, reading nothing
            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            await eventually(lambda: "session.next.step.ended" in seen)
            # Overflow the follower's buffer while it reads nothing: the deletion's own
            # notification is then dropped, and only the store can tell it the session went.
            delta = ev.TextDelta(
                timestamp=0, session_id=sid, assistant_message_id="msg_x", text_id="t", delta="x"
            )
            for _ in range(DEFAULT_SUBSCRIBER_BUFFER + 10):
                rt.hub.publish_delta(delta)
            await rt.sessions.delete(sid)
            pull.set()
            with trio.fail_after(5):
                await ended.wait()


async def test_a_prompt_racing_the_deletion_is_admitted_or_refused_cleanly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(tmp_path, llm.ScriptedLLM(lambda request: answer("x"))) as rt:
        outcomes: list[str] = []
        for round_ in range(30):
            sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
            await rt.sessions.prompt(sid, prompt=prompt("warm"))
            await rt.sessions.wait_idle(sid)  # active, idle and ready: prompts open directly

            async def admit(sid: str = sid) -> None:
                try:
                    await rt.sessions.prompt(sid, prompt=prompt("again"))
                    outcomes.append("admitted")
                except SessionNotFoundError:
                    outcomes.append("refused")

            async with trio.open_nursery() as nursery:
                if round_ % 2:
                    nursery.start_soon(admit)
                    nursery.start_soon(rt.sessions.delete, sid)
                else:
                    nursery.start_soon(rt.sessions.delete, sid)
                    await trio.sleep(0.0005 * (round_ % 7))
                    nursery.start_soon(admit)
            with pytest.raises(SessionNotFoundError):
                await rt.sessions.get(sid)
        assert len(outcomes) == 30
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_deletion_racing_other_calls_leaves_no_failed_drain(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Random mixes of calls (a second deletion among them) around one deletion: every
    call answers or says the session is gone, and no drain fails on the way."""
    rng = random.Random(7)
    unexpected: list[str] = []
    async with running(tmp_path, llm.ScriptedLLM(lambda request: answer("x"))) as rt:
        for round_ in range(40):
            sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
            await rt.sessions.prompt(sid, prompt=prompt("warm"))
            if round_ % 3:
                await rt.sessions.wait_idle(sid)
            calls: dict[str, Callable[[], Awaitable[Any]]] = {
                "steer": lambda sid=sid: rt.sessions.prompt(sid, prompt=prompt("again")),
                "queue": lambda sid=sid: rt.sessions.prompt(
                    sid, prompt=prompt("later"), delivery="queue"
                ),
                "interrupt": lambda sid=sid: rt.sessions.interrupt(sid),
                "wait": lambda sid=sid: rt.sessions.wait_idle(sid),
                "resume": lambda sid=sid: rt.sessions.resume(sid),
                "model": lambda sid=sid: rt.sessions.switch_model(
                    sid, ModelRef(id="m", provider_id="p")
                ),
                "context": lambda sid=sid: rt.sessions.context(sid),
                "delete again": lambda sid=sid: rt.sessions.delete(sid),
                "child": lambda sid=sid: rt.sessions.create(
                    location=Location(directory=str(tmp_path)), parent_id=sid
                ),
            }

            async def call(name: str, make: Callable[[], Awaitable[Any]]) -> None:
                try:
                    await make()
                except SessionNotFoundError:
                    pass
                except Exception as exc:  # noqa: BLE001 - collected for the assertion
                    unexpected.append(f"{name}: {exc!r}")

            async with trio.open_nursery() as nursery:
                for index, name in enumerate(rng.sample(sorted(calls), 4)):
                    if index == 2:
                        nursery.start_soon(call, "delete", lambda sid=sid: rt.sessions.delete(sid))
                    nursery.start_soon(call, name, calls[name])
                    await trio.sleep(rng.choice([0, 0, 0.0003, 0.001]))
            with pytest.raises(SessionNotFoundError):
                await rt.sessions.get(sid)
            orphans = await rt.storage.read(Children(session_id=sid))
            assert orphans == [], round_
    assert unexpected == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
