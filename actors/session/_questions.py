"""Durable questions to the user, behind the ``question`` and plan tools.

``ask`` records ``question.v2.asked`` durably, then waits for the user's answers
(``reply``, recorded as ``question.v2.replied``) or a rejection (``reject``,
``question.v2.rejected``). A question whose call is cancelled while waiting is recorded as
rejected. A question left pending by a crash stays pending (listed, answerable): its tool
call was closed as interrupted, so its answers reach the model as a prompt instead
(``late_answer``), admitted by whichever comes second of the reply and the closing of
the call (``admit_late_answers``), under one message id derived from the reply.

An answer whose write is reported failed, or refused because the question is no longer
pending, puts the question in doubt: the waiting call reads its durable state, as a
permission request's does (``actors.session._replies``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from typing import Final, TypeVar

import trio

from actors.session._replies import AwaitedReplies, Stored
from actors.store import StorageActor
from runtime import (
    IdGenerator,
    InvalidInputError,
    Prompt,
    PromptConflictError,
    QuestionNotFoundError,
    SessionNotFoundError,
    StorageError,
    derived_id,
)
from runtime import events as ev
from runtime.tools import QuestionDismissed
from storage import AdmitPrompt, Append, Command, EventsOfType, ReplyQuestion, StoredEvent

__all__ = [
    "DEFAULT_QUESTION_EVENTS",
    "DurableQuestions",
    "admit_late_answers",
    "late_answer",
    "pending_questions",
]

DEFAULT_QUESTION_EVENTS: Final = 10_000
"""Most question events read back to list pending questions or find answers."""
_CANCEL_GRACE: Final = 5.0
_TYPES: Final = ["question.v2.asked", "question.v2.replied", "question.v2.rejected"]
_ANSWERS: Final = _TYPES[1:]
_ASKED_AND_REPLIED: Final = _TYPES[:2]

Answers = list[list[str]] | None  # None: rejected
T = TypeVar("T")


def pending_questions(events: Sequence[ev.DurableEvent]) -> list[ev.QuestionAsked]:
    """The questions among *events* (chronological) neither replied nor rejected."""
    asked: dict[str, ev.QuestionAsked] = {}
    for event in events:
        if isinstance(event, ev.QuestionAsked):
            asked[event.id] = event
        elif isinstance(event, ev.QuestionReplied | ev.QuestionRejected):
            asked.pop(event.request_id, None)
    return list(asked.values())


def late_answer(asked: ev.QuestionAsked, replied: ev.QuestionReplied, now: int) -> AdmitPrompt:
    """The admission, at *now*, of the prompt that carries *replied*'s answers to the model
    when the call that asked was closed without them (a crash cut it). Its message id is
    derived from the reply, so every path that admits it admits it once (an exact retry)."""
    pairs = ", ".join(
        f'"{q.question}"="{", ".join(a) or "Unanswered"}"'
        for q, a in zip(asked.questions, replied.answers, strict=True)
    )
    text = f"Answers to the questions asked before the interruption: {pairs}."
    message_id = derived_id("msg", replied.timestamp, replied.request_id)
    return AdmitPrompt(
        session_id=replied.session_id, message_id=message_id, prompt=Prompt(text=text),
        delivery="steer", timestamp=now,
    )  # fmt: skip


async def admit_late_answers(
    storage: StorageActor, session_id: str, calls: Collection[str], now: int, *, limit: int
) -> tuple[list[str], set[str]]:
    """Admit the late answer (``late_answer``) of every question asked by one of *calls*
    (tool calls of the session closed, or about to be, without an answer) that the store
    holds replied, reading the last *limit* asked and replied questions. Returns the
    message ids admitted (an exact retry of one admitted before counts) and the calls
    among *calls* whose question has no reply yet. Does not wake the session.

    Raises StorageError when a read or an admission fails (the answers are still stored;
    what was admitted stands). Cancellation leaves what was admitted so far.
    """
    if not calls:
        return [], set()
    query = EventsOfType(types=list(_ASKED_AND_REPLIED), session_id=session_id, limit=limit)
    asked: dict[str, ev.QuestionAsked] = {}
    replied: dict[str, ev.QuestionReplied] = {}
    for event in [_decode(s) for s in await storage.read(query)]:
        if isinstance(event, ev.QuestionAsked) and event.tool and event.tool.call_id in calls:
            asked[event.id] = event
        elif isinstance(event, ev.QuestionReplied):
            replied[event.request_id] = event
    admitted, waiting = [], set()
    for request_id, question in asked.items():
        answer = replied.get(request_id)
        if answer is None:
            assert question.tool  # only questions asked by *calls* were kept
            waiting.add(question.tool.call_id)
            continue
        late = late_answer(question, answer, now)
        await storage.write(late)
        admitted.append(late.message_id)
    return admitted, waiting


def _check_answers(asked: ev.QuestionAsked, answers: list[list[str]]) -> None:
    if len(answers) != len(asked.questions):
        raise InvalidInputError(
            f"Expected {len(asked.questions)} answer(s), one per question; got {len(answers)}"
        )
    for info, answer in zip(asked.questions, answers, strict=True):
        if info.multiple is not True and len(answer) > 1:
            raise InvalidInputError(f"Question {info.header!r} takes one answer")
        labels = {o.label for o in info.options}
        if info.custom is False and any(a not in labels for a in answer):
            raise InvalidInputError(
                f"Question {info.header!r} takes one of: {', '.join(sorted(labels))}"
            )


class DurableQuestions:
    """Pending questions recorded in the event store, answered by clients.

    Args:
        limit: most question events read back per listing (asked, replied, rejected).
        closing: tells whether the runtime is closing (a cancelled question stays pending).
    """

    def __init__(
        self, storage: StorageActor, now_ms: Callable[[], int], ids: IdGenerator,
        *, limit: int, closing: Callable[[], bool] = lambda: False,
    ) -> None:  # fmt: skip
        self._storage = storage
        self._now = now_ms
        self._ids = ids
        self._limit = limit
        self._closing = closing
        self._answers: AwaitedReplies[Answers] = AwaitedReplies()
        self._lock = trio.Lock()

    async def ask(
        self, session_id: str, questions: list[ev.QuestionInfo], tool: ev.QuestionTool
    ) -> list[list[str]]:
        """Record the questions and wait for the answers.

        Raises QuestionDismissed when the user rejects them. Cancellation records them
        as rejected (shielded, bounded; unless answered first, or the runtime is closing:
        then they stay pending) and re-raises.
        """
        request_id = self._ids.new("que")
        asked = ev.QuestionAsked(
            timestamp=self._now(), session_id=session_id, id=request_id, questions=questions,
            tool=tool,
        )  # fmt: skip
        self._answers.expect(request_id)
        try:
            await self._storage.write(Append(session_id=session_id, events=[asked]))
            answers = await self._answers.wait(
                request_id, lambda: self._stored(session_id, request_id)
            )
        except BaseException:
            if not self._answers.answered(request_id) and not self._closing():
                with trio.move_on_after(_CANCEL_GRACE, shield=True):
                    with contextlib.suppress(
                        PromptConflictError, SessionNotFoundError, QuestionNotFoundError,
                        StorageError,
                    ):  # fmt: skip
                        await self.reject(session_id, request_id)
            raise
        finally:
            self._answers.forget(request_id)
        if answers is None:
            raise QuestionDismissed(request_id)
        return answers

    async def pending(self, session_id: str | None) -> list[ev.QuestionAsked]:
        """The pending questions of one session (every session's with None), oldest first."""
        stored = await self._storage.read(
            EventsOfType(types=_TYPES, session_id=session_id, limit=self._limit)
        )
        return pending_questions([_decode(s) for s in stored])

    async def find(self, request_id: str, session_id: str | None = None) -> ev.QuestionAsked:
        """The pending question *request_id*. Raises QuestionNotFoundError when there is
        none (in *session_id*, when given). A question a call of this process still waits
        for that the store no longer lists was answered by a write reported failed: the
        waiting call reads that answer."""
        for asked in await self.pending(session_id):
            if asked.id == request_id:
                return asked
        self._answers.doubt(request_id)
        raise QuestionNotFoundError(request_id)

    async def reply(
        self, session_id: str, request_id: str, answers: list[list[str]]
    ) -> tuple[bool, ev.InputAdmitted | None]:
        """Answer a pending question: whether a tool call of this process was waiting for
        it, and the late answer admitted with the reply when the store shows the call
        that asked closed (``late_answer``; the caller wakes the session). With neither,
        the call waits on another worker, or a crash cut it and its recovery, still to
        come, admits the late answer (``admit_late_answers``).

        Raises:
            QuestionNotFoundError: no such pending question in the session.
            InvalidInputError: answers that do not fit the questions.
            StorageError: the answer's write failed (it may be in the store all the same:
                the waiting call looks it up once the store serves again).
        """
        _, admitted = await self._record(session_id, request_id, answers)
        return self._answers.deliver(request_id, answers), admitted

    async def _record(
        self, session_id: str, request_id: str, answers: list[list[str]]
    ) -> tuple[ev.QuestionAsked, ev.InputAdmitted | None]:
        """Write the reply (``ReplyQuestion``, with its late answer): the question, and the
        late answer's receipt when it was admitted. Raises as ``reply``."""
        async with self._lock:
            asked = await self.find(request_id, session_id)
            _check_answers(asked, answers)
            replied = ev.QuestionReplied(
                timestamp=self._now(), session_id=session_id, request_id=request_id,
                answers=answers,
            )  # fmt: skip
            late = late_answer(asked, replied, replied.timestamp)
            command = ReplyQuestion(replied, asked.tool or None, late)
            return asked, await self._write(request_id, command)

    async def reject(self, session_id: str, request_id: str) -> bool:
        """Reject a pending question; True when a tool call was waiting for it.

        Raises:
            QuestionNotFoundError: no such pending question in the session.
            StorageError: the rejection's write failed (in doubt, as for ``reply``).
        """
        async with self._lock:
            await self.find(request_id, session_id)
            rejected = ev.QuestionRejected(
                timestamp=self._now(), session_id=session_id, request_id=request_id
            )
            await self._write(request_id, Append(session_id=session_id, events=[rejected]))
        return self._answers.deliver(request_id, None)

    async def _write(self, request_id: str, command: Command[T]) -> T:
        try:
            return await self._storage.write(command)
        except StorageError:
            self._answers.doubt(request_id)  # the waiting call reads the stored answer
            raise

    async def _stored(self, session_id: str, request_id: str) -> Stored[Answers] | None:
        """The question's answer as the store holds it (None: still pending)."""
        query = EventsOfType(types=_ANSWERS, session_id=session_id, limit=self._limit)
        for event in [_decode(s) for s in await self._storage.read(query)]:
            if isinstance(event, ev.QuestionReplied) and event.request_id == request_id:
                return Stored(event.answers)
            if isinstance(event, ev.QuestionRejected) and event.request_id == request_id:
                return Stored(None)
        return None

    def replied_elsewhere(self, request_id: str, answers: Answers) -> None:
        """An answer (None: a rejection) another worker recorded (cluster mode): the tool
        call waiting here for *request_id*, if any, goes on with it."""
        self._answers.deliver(request_id, answers)


def _decode(stored: StoredEvent) -> ev.DurableEvent:
    return ev.decode_event(stored.data)
