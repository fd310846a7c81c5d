"""Deliberately broken runtimes, to show each invariant checker catches what it guards.

A plant replaces one function of the runtime for the duration of a ``with planted(name)``
block and puts it back after; with no plant nothing is replaced, so the runtime runs its
own code at its own cost. Test-only: nothing outside ``sims`` imports this.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import msgspec

import actors.api._sessions as sessions_module
import actors.session._questions as questions_module
import actors.session._recovery as recovery_module
import storage._batch as batch_module
import storage._commands as commands_module
from runtime import events as ev
from runtime import messages as m
from runtime.tools import ToolContext
from storage import ReplyQuestion, SessionHistory

__all__ = ["PLANTS", "EXPECTED", "planted"]

# Which checker each plant must trip.
EXPECTED: Final = {
    "promote-twice": "admission.promoted_once",
    "drop-admission": "admission.acknowledged_durable",
    "rerun-tool": "tools.executed_once",
    "skip-seq": "events.contiguous_seqs",
    "default-answers": "questions.answer_reaches_call",
    "drop-late-answer": "questions.answer_reaches_call",
}


def _promote_twice() -> Callable[[], None]:
    original = batch_module.WriteBatch.promote

    def promote(self: Any, session_id: str, **kw: Any) -> list[ev.InputAdmitted]:
        rows = original(self, session_id, **kw)
        if rows:  # the bug: the first promoted row is promoted again
            row = rows[0]
            again = ev.PromptPromoted(
                timestamp=kw["timestamp"], session_id=session_id, message_id=row.id,
                prompt=row.prompt, time_created=row.time_created,
            )  # fmt: skip
            self.append(session_id, [again])
        return rows

    batch_module.WriteBatch.promote = promote  # type: ignore[method-assign]
    return lambda: setattr(batch_module.WriteBatch, "promote", original)


def _drop_admission() -> Callable[[], None]:
    original = sessions_module.Sessions.prompt

    async def prompt(self: Any, session_id: str, *, prompt: Any, id: str | None = None,
                     delivery: str = "steer", resume: bool = True) -> ev.InputAdmitted:  # fmt: skip
        if zlib.crc32(prompt.text.encode()) % 3 == 0:  # the bug: acknowledged, never written
            return ev.InputAdmitted(
                admitted_seq=1 << 30, id=id or self._ids.new("msg"), session_id=session_id,
                prompt=prompt, delivery=delivery, time_created=self._now(),  # type: ignore[arg-type]
            )  # fmt: skip
        return await original(
            self,
            session_id,
            prompt=prompt,
            id=id,
            delivery=delivery,
            resume=resume,  # type: ignore[arg-type]
        )

    sessions_module.Sessions.prompt = prompt  # type: ignore[method-assign]
    return lambda: setattr(sessions_module.Sessions, "prompt", original)


# The tool handler a re-running recovery calls; the simulation sets it per run.
RERUN: list[Callable[[dict[str, Any], ToolContext], Any]] = []


def _rerun_tool() -> Callable[[], None]:
    original = recovery_module.recover_session

    async def recover(storage: Any, session_id: str, now: int) -> bool:
        # The bug: a call a crash cut is run again before recovery closes it.
        info, history = await storage.read(SessionHistory(session_id=session_id))
        for _, message in history:
            if (
                not isinstance(message, m.AssistantMessage)
                or message.time.completed is not msgspec.UNSET
            ):
                continue
            for part in message.content:
                if (
                    isinstance(part, m.AssistantTool)
                    and isinstance(part.state, m.ToolRunning)
                    and RERUN
                ):
                    ctx = ToolContext(
                        session_id=session_id, agent="build", assistant_message_id=message.id,
                        tool_call_id=part.id, directory=info.location.directory if info else "",
                    )  # fmt: skip
                    await RERUN[0](dict(part.state.input), ctx)
        return await original(storage, session_id, now)

    recovery_module.recover_session = recover  # type: ignore[assignment]
    return lambda: setattr(recovery_module, "recover_session", original)


def _skip_seq() -> Callable[[], None]:
    original = batch_module.WriteBatch.append

    def append(self: Any, session_id: str, events: Any) -> list[int]:
        row = self._writable_row(session_id) if events else None
        if row is not None and row.last_seq == 5:  # the bug: seq 6 is never used
            row.last_seq += 1
        return original(self, session_id, events)

    batch_module.WriteBatch.append = append  # type: ignore[method-assign]
    return lambda: setattr(batch_module.WriteBatch, "append", original)


def _default_answers() -> Callable[[], None]:
    original = questions_module.DurableQuestions.reply

    async def reply(
        self: Any, session_id: str, request_id: str, answers: list[list[str]]
    ) -> tuple[bool, ev.InputAdmitted | None]:
        asked, admitted = await self._record(session_id, request_id, answers)
        # The bug: the answers are stored, but the waiting call hears each question's
        # first option instead.
        defaults = [[info.options[0].label] for info in asked.questions]
        return bool(self._answers.deliver(request_id, defaults)), admitted

    questions_module.DurableQuestions.reply = reply  # type: ignore[method-assign]
    return lambda: setattr(questions_module.DurableQuestions, "reply", original)


def _drop_late_answer() -> Callable[[], None]:
    handlers: dict[type[Any], Any] = commands_module._HANDLERS
    original = handlers[ReplyQuestion]

    def reply(b: Any, c: ReplyQuestion) -> None:
        # The bug: the answers are recorded, but a call a crash closed never hears them
        # (no late answer is admitted).
        b.append(c.replied.session_id, [c.replied])

    handlers[ReplyQuestion] = reply
    return lambda: handlers.__setitem__(ReplyQuestion, original)


PLANTS: Final[dict[str, Callable[[], Callable[[], None]]]] = {
    "promote-twice": _promote_twice,
    "drop-admission": _drop_admission,
    "rerun-tool": _rerun_tool,
    "skip-seq": _skip_seq,
    "default-answers": _default_answers,
    "drop-late-answer": _drop_late_answer,
}


@contextmanager
def planted(name: str | None) -> Iterator[None]:
    """Run the block with the plant *name* in place (none: the runtime as it is)."""
    if name is None:
        yield
        return
    undo = PLANTS[name]()
    try:
        yield
    finally:
        undo()
