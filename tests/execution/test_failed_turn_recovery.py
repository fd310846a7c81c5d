"""A tool call without a result is closed on the restarted store, even when the first
tries of that closing write fail too: after a failed turn (seed 1119374 of the simulator's
long run) and at start-up after a crash (seed 1182887)."""

from __future__ import annotations

import errno
import os
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import UNSET

from actors.session._recovery import RECOVERY_ATTEMPTS
from runtime import llm, open_runtime
from runtime import messages as m
from storage import JournalFiles, SessionHistory
from tests.execution.conftest import (
    answer,
    cut_tool_and_step,
    eventually,
    prompt,
    run_child_until_cut,
    running,
    tool_calls,
)


class PlannedSyncs(JournalFiles):
    """The journal's file operations; given a plan, each fdatasync of written records
    takes the plan's next outcome: ``"ok"``, or ``"drop"`` (it fails and the kernel dropped
    the dirty pages: the records written since the last sync are gone)."""

    def __init__(self) -> None:
        self.plan: list[str] = []
        self.taken: list[str] = []
        self._dirty: dict[int, int] = {}  # fd -> where its unsynced records start

    def pwrite(self, fd: int, data: Any, offset: int) -> int:  # type: ignore[override]
        if len(data) > 0 and bytes(data[:1]) != b"\x00":
            self._dirty.setdefault(fd, offset)
        return os.pwrite(fd, data, offset)

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        start = self._dirty.pop(fd, None)
        if start is not None and self.plan:
            outcome = self.plan.pop(0)
            self.taken.append(outcome)
            if outcome == "drop":
                os.ftruncate(fd, start)
                raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


@pytest.mark.parametrize("failed_tries", [1, RECOVERY_ATTEMPTS - 1])
async def test_the_closing_write_is_tried_again_on_the_restarted_store(
    tmp_path: Path, failed_tries: int
) -> None:
    files = PlannedSyncs()
    client = llm.ScriptedLLM([tool_calls(("c1", "gated", {"key": "k"})), answer()])
    store_options: dict[str, Any] = {"journal_files": files}
    async with running(tmp_path, client, storage_mode="inline", store_options=store_options) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await eventually(lambda: "k" in rt.test_gates.started)
        # The result's write fails (its pages dropped: the call has no result), the turn
        # closes its step failed on the restarted store, and the first tries of the write
        # that closes the call fail the same way.
        files.plan = ["drop", "ok", *["drop"] * failed_tries]
        planned = list(files.plan)
        rt.test_gates.open("k")
        with trio.fail_after(20):
            await rt.sessions.wait_idle(sid)
        assert files.taken == planned
        _, history = await rt.storage.read(SessionHistory(session_id=sid))
        [turn] = [message for _, message in history if isinstance(message, m.AssistantMessage)]
        [call] = [part for part in turn.content if isinstance(part, m.AssistantTool)]
        assert isinstance(call.state, m.ToolError)  # closed: the second try reached the store
        assert turn.error is not UNSET  # the step failed
        assert len(client.requests) == 1  # nothing prompts the session again


@pytest.mark.parametrize("failed_tries", [RECOVERY_ATTEMPTS - 1, RECOVERY_ATTEMPTS + 1])
async def test_a_crash_cut_call_is_closed_when_start_up_recovery_writes_fail(
    tmp_path: Path, failed_tries: int
) -> None:
    """A SIGKILL cut a tool call; the restarted runtime's recovery writes fail. Within
    RECOVERY_ATTEMPTS tries the call is closed before the runtime serves; past them the
    session's actor, woken at start-up, closes it with no client asking."""
    (tmp_path / "work").mkdir()
    await trio.to_thread.run_sync(
        partial(run_child_until_cut, tmp_path / "data", tmp_path / "work", queue=False)
    )
    files = PlannedSyncs()
    files.plan = ["drop"] * failed_tries
    client = llm.ScriptedLLM([])
    store_options: dict[str, Any] = {"journal_files": files}
    options: dict[str, Any] = dict(storage_mode="inline", store_options=store_options)
    async with open_runtime(data_dir=tmp_path / "data", llm=client, **options) as rt:
        sid = "ses_kill"

        async def closed() -> bool:
            _, history = await rt.storage.read(SessionHistory(session_id=sid))
            calls = [
                part
                for _, message in history
                if isinstance(message, m.AssistantMessage)
                for part in message.content
                if isinstance(part, m.AssistantTool)
            ]
            return bool(calls) and all(isinstance(c.state, m.ToolError) for c in calls)

        if failed_tries < RECOVERY_ATTEMPTS:
            assert await closed()  # before open_runtime returned
        else:
            with trio.fail_after(20):  # the drain the start-up wake began
                await rt.sessions.wait_idle(sid)
            assert await closed()
        assert files.taken == ["drop"] * failed_tries
        cut_tool_and_step(await rt.sessions.context(sid))
        assert await rt.sessions.needs_resume() == [sid]  # cut work waits for a resume
        assert client.requests == []  # recovery never asks the provider
