"""A failed turn's tool call without a result is closed on the restarted store, even when
the first try of that closing write fails too (seed 1119374 of the simulator's long run)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import trio
from msgspec import UNSET

from runtime import llm
from runtime import messages as m
from storage import JournalFiles, SessionHistory
from tests.execution.conftest import answer, eventually, prompt, running, tool_calls


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


async def test_the_closing_write_is_tried_again_on_the_restarted_store(tmp_path: Path) -> None:
    files = PlannedSyncs()
    client = llm.ScriptedLLM([tool_calls(("c1", "gated", {"key": "k"})), answer()])
    store_options: dict[str, Any] = {"journal_files": files}
    async with running(tmp_path, client, storage_mode="inline", store_options=store_options) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await eventually(lambda: "k" in rt.test_gates.started)
        # The result's write fails (its pages dropped: the call has no result), the turn
        # closes its step failed on the restarted store, and the first try of the write
        # that closes the call fails the same way.
        files.plan = ["drop", "ok", "drop"]
        rt.test_gates.open("k")
        with trio.fail_after(20):
            await rt.sessions.wait_idle(sid)
        assert files.taken == ["drop", "ok", "drop"]
        _, history = await rt.storage.read(SessionHistory(session_id=sid))
        [turn] = [message for _, message in history if isinstance(message, m.AssistantMessage)]
        [call] = [part for part in turn.content if isinstance(part, m.AssistantTool)]
        assert isinstance(call.state, m.ToolError)  # closed: the second try reached the store
        assert turn.error is not UNSET  # the step failed
        assert len(client.requests) == 1  # nothing prompts the session again
