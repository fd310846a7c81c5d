"""Invariant checkers: fed every committed event as it is published (after every step),
and asked about the whole store at the end and after every simulated crash.

Each checker has a name (the summary table counts checks and violations by name); a
violation is a line of text naming the session and what broke.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from runtime import SessionMessage, derived_id
from runtime import events as ev
from runtime.history import project
from storage import StoredEvent

__all__ = ["CHECKS", "Checker", "FoldState", "check_late_answers", "fold"]

CHECKS: Final = (
    "admission.promoted_once",
    "admission.acknowledged_durable",
    "events.contiguous_seqs",
    "events.fold_equals_projection",
    "events.published_survive_crash",
    "tools.executed_once",
    "tools.cut_recorded_interrupted",
    "turns.cap_per_promoted_batch",
    "context.epoch_baseline_stable",
    "permissions.issuing_turn_agent",
    "questions.answer_reaches_call",
    "liveness.idle_after_faults",
)
_UNANSWERED: Final = "unanswered"
_Answers = list[list[str]] | None


class _Session:
    __slots__ = (
        "admitted", "agents", "answered", "asked", "asked_by", "asks", "called", "compactions",
        "deleted", "due", "last_type", "late", "next_seq", "pending", "promoted", "questions",
        "settled", "texts", "turns",
    )  # fmt: skip

    def __init__(self) -> None:
        self.next_seq = 0
        self.admitted: dict[str, int] = {}
        self.promoted: dict[str, int] = {}
        self.pending: dict[str, int] = {}
        self.turns = 0
        self.last_type = ""
        self.agents: dict[str, str] = {}  # assistant message id -> agent of its turn
        self.called: dict[str, str] = {}  # call id -> assistant message id
        self.settled: dict[str, str] = {}  # call id -> success | failed
        self.asks: set[str] = set()  # permission requests not answered yet
        self.questions: set[str] = set()  # questions neither answered nor rejected yet
        self.asked_by: dict[str, str] = {}  # call id -> the question it asked
        self.answered: dict[str, _Answers] = {}  # question -> answers (None: rejected)
        self.asked: dict[str, ev.QuestionAsked] = {}
        self.late: dict[str, str] = {}  # question -> the message id of its late answer
        self.texts: dict[str, str] = {}  # admitted message id -> its prompt's text
        self.due: str | None = None  # a late answer the reply's own batch must hold next
        self.compactions = 0
        self.deleted = False


class Checker:
    """The step-by-step checks over the stream of committed events."""

    def __init__(self, caps: dict[str, int]) -> None:
        self.caps = caps
        self.sessions: dict[str, _Session] = {}
        self.checks: Counter[str] = Counter()
        self.violations: list[str] = []
        self.compactions = 0

    def fail(self, check: str, message: str) -> None:
        self.violations.append(f"{check}: {message}")

    def feed(self, stored: Iterable[StoredEvent]) -> None:
        for event in stored:
            self._one(event)

    def _one(self, stored: StoredEvent) -> None:
        sid = stored.aggregate_id
        s = self.sessions.setdefault(sid, _Session())
        self.checks["events.contiguous_seqs"] += 1
        if stored.seq != s.next_seq:
            self.fail("events.contiguous_seqs", f"{sid} seq {stored.seq} after {s.next_seq - 1}")
        s.next_seq = stored.seq + 1
        event = ev.decode_event(stored.data)
        if s.due is not None:
            self.checks["questions.answer_reaches_call"] += 1
            if not (isinstance(event, ev.PromptAdmitted) and event.message_id == s.due):
                self.fail("questions.answer_reaches_call", f"{sid} late answer {s.due} not next")
            s.due = None
        if isinstance(event, ev.PromptAdmitted):
            s.admitted[event.message_id] = stored.seq
            s.texts[event.message_id] = event.prompt.text
            s.pending[event.message_id] = stored.seq
        elif isinstance(event, ev.PromptPromoted):
            self.checks["admission.promoted_once"] += 1
            mid = event.message_id
            if mid in s.promoted:
                self.fail("admission.promoted_once", f"{sid} {mid} promoted twice")
            elif mid not in s.admitted:
                self.fail("admission.promoted_once", f"{sid} {mid} promoted, never admitted")
            s.promoted[mid] = stored.seq
            s.pending.pop(mid, None)
            if s.last_type != "promoted":  # one allowance reset per promoted batch
                s.turns = 0
        elif isinstance(event, ev.StepStarted):
            s.agents[event.assistant_message_id] = event.agent
            s.turns += 1
            cap = self.caps.get(event.agent, 0)
            self.checks["turns.cap_per_promoted_batch"] += 1
            if s.turns > cap:
                self.fail("turns.cap_per_promoted_batch", f"{sid} turn {s.turns} > {cap}")
        elif isinstance(event, ev.StepEnded):
            if event.finish != "tool-calls":
                s.turns = 0
        elif isinstance(event, ev.StepFailed | ev.ResumeNeeded):
            # A crash's recovery ends the activity (ResumeNeeded): an explicit resume
            # opens a new one, with the agent's whole allowance.
            s.turns = 0
        elif isinstance(event, ev.ToolCalled):
            s.called[event.call_id] = event.assistant_message_id
        elif isinstance(event, ev.ToolSuccess):
            s.settled[event.call_id] = "success"
            if event.call_id in s.asked_by:
                self._answer_reached(sid, s, event)
        elif isinstance(event, ev.ToolFailed):
            s.settled[event.call_id] = "failed"
        elif isinstance(event, ev.PermissionReplied):
            s.asks.discard(event.request_id)
        elif isinstance(event, ev.PermissionAsked) and event.tool:
            s.asks.add(event.request_id)
            self.checks["permissions.issuing_turn_agent"] += 1
            message = event.message_id if isinstance(event.message_id, str) else None
            message = message or s.called.get(event.call_id)
            turn_agent = s.agents.get(message or "")
            if turn_agent is not None and turn_agent != event.agent:
                self.fail(
                    "permissions.issuing_turn_agent",
                    f"{sid} {event.request_id} asked as {event.agent}, turn ran {turn_agent}",
                )
        elif isinstance(event, ev.QuestionAsked):
            s.questions.add(event.id)
            s.asked[event.id] = event
            if event.tool:
                s.asked_by[event.tool.call_id] = event.id
        elif isinstance(event, ev.QuestionReplied | ev.QuestionRejected):
            self.checks["questions.answer_reaches_call"] += 1
            answers = event.answers if isinstance(event, ev.QuestionReplied) else None
            if event.request_id in s.answered:
                self.fail(
                    "questions.answer_reaches_call", f"{sid} {event.request_id} answered twice"
                )
            s.answered[event.request_id] = answers
            s.questions.discard(event.request_id)
            if isinstance(event, ev.QuestionReplied):
                late = derived_id("msg", event.timestamp, event.request_id)
                s.late[event.request_id] = late
                asker = s.asked.get(event.request_id)
                call = asker.tool.call_id if asker is not None and asker.tool else None
                if call is not None and s.settled.get(call) == "failed":
                    s.due = late  # answered after its call closed: admitted with the reply
        elif isinstance(event, ev.SessionDeleted):
            s.deleted = True
        elif isinstance(event, ev.CompactionEnded):
            self.compactions += 1
            s.compactions += 1
        s.last_type = "promoted" if isinstance(event, ev.PromptPromoted) else stored.type

    def _answer_reached(self, sid: str, s: _Session, event: ev.ToolSuccess) -> None:
        """A call that asked the user succeeded: with the stored answers (``question``), or
        after a stored yes (the plan switches)."""
        self.checks["questions.answer_reaches_call"] += 1
        request = s.asked_by[event.call_id]
        stored = s.answered.get(request, _UNANSWERED)
        got = event.structured.get("answers", [["Yes"]])
        if got != stored:
            self.fail(
                "questions.answer_reaches_call",
                f"{sid} {event.call_id} went on with {got}; {request} was answered {stored}",
            )


def check_late_answers(c: Checker, sid: str) -> None:
    """A late answer (the answers to a question whose call was closed without them, as a
    prompt) names each question and answer, and no call that went on with its answers
    gets one too; one the step checks expected is there."""
    s = c.sessions.get(sid)
    if s is None:
        return
    if s.due is not None:
        c.checks["questions.answer_reaches_call"] += 1
        c.fail("questions.answer_reaches_call", f"{sid} no late answer {s.due} at the end")
    for call, request in s.asked_by.items():
        answers, message_id = s.answered.get(request), s.late.get(request)
        text = s.texts.get(message_id or "")
        if answers is None or text is None:
            continue  # rejected, never answered, or answered to the waiting call
        c.checks["questions.answer_reaches_call"] += 1
        asked = s.asked[request].questions
        named = [f'"{q.question}"=' for q in asked] + [a for answer in answers for a in answer]
        if s.settled.get(call) == "success":
            c.fail("questions.answer_reaches_call", f"{sid} {request}: prompt and call both")
        elif not all(part in text for part in named):
            c.fail("questions.answer_reaches_call", f"{sid} {message_id} says {text!r}")


class FoldState:
    """An in-memory ``ProjectionState``: a fresh fold of one session's event log."""

    def __init__(self) -> None:
        self.info: dict[str, ev.SessionInfo] = {}
        self.inputs: dict[str, ev.InputAdmitted] = {}
        self.messages: dict[str, tuple[int, SessionMessage]] = {}
        self.permissions: dict[str, ev.PermissionInfo] = {}

    def session(self, session_id: str) -> ev.SessionInfo:
        return self.info[session_id]

    def put_session(self, info: ev.SessionInfo) -> None:
        self.info[info.id] = info

    def put_input(self, row: ev.InputAdmitted) -> None:
        self.inputs[row.id] = row

    def promote_input(self, session_id: str, message_id: str, seq: int) -> None:
        row = self.inputs.get(message_id)
        if row is not None:
            self.inputs[message_id] = msgspec.structs.replace(row, promoted_seq=seq)

    def message(self, session_id: str, message_id: str) -> SessionMessage | None:
        entry = self.messages.get(message_id)
        return entry[1] if entry else None

    def put_message(self, session_id: str, seq: int, message: SessionMessage) -> None:
        if seq < 0:
            entry = self.messages.get(message.id)
            seq = entry[0] if entry else 0
        self.messages[message.id] = (seq, message)

    def clear_epoch(self, session_id: str) -> None:
        pass

    def permission(self, request_id: str) -> ev.PermissionInfo | None:
        return self.permissions.get(request_id)

    def put_permission(self, info: ev.PermissionInfo) -> None:
        self.permissions[info.id] = info

    def drop_session(self, session_id: str) -> None:
        self.info.pop(session_id, None)


def fold(events: Iterable[StoredEvent]) -> FoldState:
    """Project *events* from nothing."""
    state = FoldState()
    for stored in events:
        project(ev.decode_event(stored.data), stored.seq, state)
    return state


_ENCODE = msgspec.json.Encoder(order="deterministic").encode


def same_history(folded: FoldState, stored: list[tuple[int, SessionMessage]]) -> str | None:
    """None when the store's projected history equals the fold; else the first difference."""
    mine = sorted(((seq, m.id), _ENCODE(m)) for seq, m in folded.messages.values())
    theirs = sorted(((seq, m.id), _ENCODE(m)) for seq, m in stored)
    if mine == theirs:
        return None
    for a, b in zip(mine, theirs, strict=False):
        if a != b:
            return f"fold {a[0]} {a[1][:160]!r} != store {b[0]} {b[1][:160]!r}"
    return f"fold has {len(mine)} messages, store {len(theirs)}"


def describe(value: Any) -> str:
    return _ENCODE(value).decode()[:200]
