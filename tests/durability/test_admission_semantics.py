"""Prompt admission through a real runtime: ids, exact retries, conflicts, bad input, events."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from runtime import (
    InputAdmitted,
    InvalidInputError,
    Location,
    Prompt,
    PromptConflictError,
    SessionNotFoundError,
    is_valid_id,
    open_runtime,
)
from runtime.inbox import MAX_PROMPT_BYTES
from runtime.llm import ScriptedLLM
from storage import AllEvents, ListSessions, PendingInputs

MODES = pytest.mark.parametrize("mode", ["threaded", "inline"])


def _all_events(rt: Any) -> Any:
    return rt.storage.read(AllEvents())


async def _events(rt: Any) -> int:
    return len(await _all_events(rt))


async def _sessions(rt: Any) -> list[str]:
    infos = await rt.storage.read(ListSessions(limit=1000))
    return [i.id for i in infos]


async def _admitted_rows(rt: Any, message_id: str) -> tuple[int, int]:
    """(inbox rows holding *message_id* across sessions, its prompt.admitted events)."""
    rows = 0
    for sid in await _sessions(rt):
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        rows += sum(1 for p in pending if p.id == message_id)
    events = sum(
        1
        for e in await _all_events(rt)
        if e.type == "session.next.prompt.admitted" and f'"{message_id}"'.encode() in e.data
    )
    return rows, events


@MODES
async def test_generated_ids_and_session_reuse(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        loc = Location(directory=str(tmp_path))
        info = await rt.sessions.create(location=loc, title="first")
        assert is_valid_id("ses", info.id, strict=True)
        other = await rt.sessions.create(location=loc)
        assert other.id != info.id

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        again = await rt.sessions.create(id=info.id, location=Location(directory=str(elsewhere)),
                                         title="second")  # fmt: skip
        assert again == info
        assert (await rt.sessions.get(info.id)) == info
        first = [e for e in await _all_events(rt) if e.aggregate_id == info.id]
        assert [(e.seq, e.type) for e in first] == [(0, "session.created")]
        assert sorted(await _sessions(rt)) == sorted([info.id, other.id])

        rec = await rt.sessions.prompt(info.id, prompt=Prompt(text="hi"), resume=False)
        assert is_valid_id("msg", rec.id, strict=True)
        assert rec.session_id == info.id and rec.admitted_seq == 1
        assert rec.delivery == "steer" and rec.prompt == Prompt(text="hi")

        explicit = await rt.sessions.create(id="ses_custom-1", location=loc)
        assert explicit.id == "ses_custom-1"


@MODES
async def test_exact_retry_returns_identical_receipt(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        first = await rt.sessions.prompt(
            sid, prompt=Prompt(text="do it"), id="msg_retry1", delivery="queue", resume=False
        )
        before = await _events(rt)
        second = await rt.sessions.prompt(
            sid, prompt=Prompt(text="do it"), id="msg_retry1", delivery="queue", resume=False
        )
        assert second == first
        assert await _events(rt) == before
        assert await _admitted_rows(rt, "msg_retry1") == (1, 1)


@MODES
async def test_conflicting_reuse_of_a_message_id(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        loc = Location(directory=str(tmp_path))
        sid = (await rt.sessions.create(location=loc)).id
        other = (await rt.sessions.create(location=loc)).id
        await rt.sessions.prompt(sid, prompt=Prompt(text="a"), id="msg_x", resume=False)
        before = await _events(rt)
        attempts: list[tuple[str, str, str]] = [
            (sid, "b", "steer"),
            (sid, "a", "queue"),
            (other, "a", "steer"),
            (other, "b", "queue"),
        ]
        for session_id, text, delivery in attempts:
            with pytest.raises(PromptConflictError):
                await rt.sessions.prompt(
                    session_id, prompt=Prompt(text=text), id="msg_x", delivery=delivery,  # type: ignore[arg-type]
                    resume=False,
                )  # fmt: skip
        assert await _events(rt) == before
        assert await _admitted_rows(rt, "msg_x") == (1, 1)
        assert await rt.storage.read(PendingInputs(session_id=other)) == []


@MODES
async def test_unknown_session(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.prompt("ses_missing", prompt=Prompt(text="hi"), resume=False)
        with pytest.raises(SessionNotFoundError):
            await rt.sessions.prompt("ses_missing", prompt=Prompt(text="hi"), resume=True)
        assert await _events(rt) == 0
        assert await _sessions(rt) == []


async def test_resume_false_admits_without_a_provider_request(tmp_path: Path) -> None:
    llm = ScriptedLLM([])
    async with open_runtime(data_dir=tmp_path, llm=llm) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        rec = await rt.sessions.prompt(sid, prompt=Prompt(text="later"), resume=False)
        # whatever the admission set going has run until it blocks; a drain it started
        # would be waited for below
        await trio.testing.wait_all_tasks_blocked()
        await rt.sessions.wait_idle(sid)
        assert llm.requests == []
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        assert [p.id for p in pending] == [rec.id]
        assert await rt.sessions.context(sid) == []


@MODES
async def test_concurrent_exact_retries_write_once(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        receipts: list[InputAdmitted] = []

        async def admit() -> None:
            receipts.append(
                await rt.sessions.prompt(sid, prompt=Prompt(text="same"), id="msg_c", resume=False)
            )

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(admit)
        assert len(receipts) == 20
        assert all(r == receipts[0] for r in receipts)
        assert await _admitted_rows(rt, "msg_c") == (1, 1)
        assert await _events(rt) == 2


# Sessions.events iterates its inner _drain_live generator without aclosing, so each
# re-read (and closing the outer stream) leaves that generator to the garbage collector.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object Sessions._drain_live"
    ":pytest.PytestUnraisableExceptionWarning"
)
@MODES
async def test_events_after_is_exclusive_and_tails_without_gap(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        for i in range(5):
            await rt.sessions.prompt(sid, prompt=Prompt(text=f"p{i}"), resume=False)
        replayed = []
        async with aclosing(rt.sessions.events(sid, after=2)) as stream:
            async for e in stream:
                replayed.append(e.seq)
                if e.seq == 5:
                    break
        assert replayed == [3, 4, 5]

        seen: list[int] = []
        done = trio.Event()

        async def follow() -> None:
            async with aclosing(rt.sessions.events(sid, after=1)) as stream:
                async for e in stream:
                    seen.append(e.seq)
                    if e.seq == 45:
                        done.set()
                        return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            for i in range(40):
                await rt.sessions.prompt(sid, prompt=Prompt(text=f"q{i}"), resume=False)
                if i % 7 == 0:
                    await trio.lowlevel.checkpoint()
            with trio.fail_after(10):
                await done.wait()
        assert seen == list(range(2, 46))


@MODES
async def test_invalid_input_writes_nothing(tmp_path: Path, mode: str) -> None:
    async with open_runtime(data_dir=tmp_path, storage_mode=mode) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        before = await _events(rt)
        big = "x" * (MAX_PROMPT_BYTES + 1)
        wide = "é" * (MAX_PROMPT_BYTES // 2 + 1)  # under the limit in chars, over it in bytes
        for text in ["", "   \n\t ", big, wide]:
            with pytest.raises(InvalidInputError):
                await rt.sessions.prompt(sid, prompt=Prompt(text=text), resume=False)
        for bad in ["bad id", "ses_../x", "msg_ok", "", "ses_a/b"]:
            with pytest.raises(InvalidInputError):
                await rt.sessions.prompt(bad, prompt=Prompt(text="hi"), resume=False)
            with pytest.raises(InvalidInputError):
                await rt.sessions.create(id=bad, location=Location(directory=str(tmp_path)))
        for bad in ["bad id", "msg_../x", "ses_ok", "msg_a b"]:
            with pytest.raises(InvalidInputError):
                await rt.sessions.prompt(sid, prompt=Prompt(text="hi"), id=bad, resume=False)
        with pytest.raises(InvalidInputError):
            await rt.sessions.prompt(sid, prompt=Prompt(text="hi"), delivery="later", resume=False)  # type: ignore[arg-type]
        assert await _events(rt) == before
        assert await _sessions(rt) == [sid]
        assert await rt.storage.read(PendingInputs(session_id=sid)) == []
        exact = "y" * MAX_PROMPT_BYTES
        rec = await rt.sessions.prompt(sid, prompt=Prompt(text=exact), resume=False)
        assert rec.prompt.text == exact
