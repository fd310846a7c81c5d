"""A prompt that opens an idle session's activity in its own batch waits for that batch
at most ``admission_timeout`` seconds, cancelled or not: a store stuck in the commit (then
failing it and restarting, or finishing it) does not hold the request. The admission is
then reported as not known, and never left half done: once the store answers, the
session's actor finds the promotion it was not handed (the session needs a resume) and a
resume answers the prompt. A real runtime on a real DuckDB file; the journal's fdatasync
is held (the ``JournalFiles`` seam)."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from runtime import StorageError, llm
from runtime import messages as m
from storage import JournalFiles, PendingInputs
from tests.execution.conftest import answer, prompt, running, user_texts

LIMIT = 0.5
"""The runtime's admission_timeout here."""
DEADLINE = 15.0
"""Seconds after which the held store is let go whatever happens: a prompt still waiting
then fails the test instead of hanging it."""


class HeldSync(JournalFiles):
    """The journal's file operations; armed, the next fdatasync waits until ``let_go``
    (then succeeds, or with *fail* fails after the write: the pages reached the file, so
    the restarted store replays the record)."""

    def __init__(self) -> None:
        self.armed = False
        self.fail = False
        self.holding = threading.Event()
        self.gone = threading.Event()

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.armed:
            self.armed = False
            self.holding.set()
            self.gone.wait(DEADLINE * 2)
            if self.fail:
                raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)

    def let_go(self) -> None:
        self.gone.set()


@asynccontextmanager
async def ready_session(tmp_path: Path) -> AsyncIterator[tuple[Any, str, HeldSync, Any]]:
    """A runtime whose session was prompted once (its actor is active, idle and ready,
    so the next prompt opens its activity in the admitting batch); the store let go
    after ``DEADLINE`` seconds whatever happens, and at the end."""
    files = HeldSync()
    client = llm.ScriptedLLM([answer("first"), answer("second")])
    options = {"journal_files": files}
    try:
        async with (
            running(tmp_path, client, store_options=options, admission_timeout=LIMIT) as rt,
            trio.open_nursery() as nursery,
        ):
            sid = rt.test_session
            await rt.sessions.prompt(sid, prompt=prompt("one"))
            await rt.sessions.wait_idle(sid)

            async def deadline() -> None:
                await trio.sleep(DEADLINE)
                files.let_go()

            nursery.start_soon(deadline)
            files.armed = True
            yield rt, sid, files, client
            nursery.cancel_scope.cancel()
    finally:
        files.let_go()


async def answered_after_resume(rt: Any, sid: str, client: Any) -> None:
    """The admission of "two" was written with its promotion, unanswered: the actor found
    it (the session needs a resume); a resume answers it."""
    await rt.sessions.wait_idle(sid)
    assert sid in await rt.sessions.needs_resume()
    assert await rt.storage.read(PendingInputs(session_id=sid)) == []
    assert len(client.requests) == 1
    await rt.sessions.resume(sid)
    assert user_texts(client.requests[1]) == ["one", "two"]
    context = await rt.sessions.context(sid)
    assert [type(x).__name__ for x in context][-2:] == ["UserMessage", "AssistantMessage"]
    assert isinstance(context[-1], m.AssistantMessage)
    assert context[-1].content[0].text == "second"


async def test_a_prompt_held_by_a_stuck_commit_is_reported_not_known_then_found(
    tmp_path: Path,
) -> None:
    async with ready_session(tmp_path) as (rt, sid, files, client):
        with pytest.raises(StorageError, match="is not known whether it was written"):
            await rt.sessions.prompt(sid, prompt=prompt("two"))
        assert not files.gone.is_set()  # answered while held
        files.let_go()
        await answered_after_resume(rt, sid, client)


async def test_a_cancelled_prompt_is_let_go_while_the_store_restarts(tmp_path: Path) -> None:
    async with ready_session(tmp_path) as (rt, sid, files, client):
        files.fail = True  # the held commit fails: the store restarts
        with trio.move_on_after(0.05) as cancelled:
            await rt.sessions.prompt(sid, prompt=prompt("two"))
        assert cancelled.cancelled_caught
        assert not files.gone.is_set()  # let go while held
        files.let_go()
        await answered_after_resume(rt, sid, client)
        assert rt.storage.statistics().restarts == 1
