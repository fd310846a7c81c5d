"""What the agent asks the client on a session's behalf: a tool call's permission (its
answer written as the request's durable reply), the permission requests of the session's
subagent children, and the ``question`` tool's questions (as one elicitation form, or as
permission requests whose options are the question's choices)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import aclosing
from typing import Final

import msgspec
import trio

from gateway.acp._backend import Backend, Reply
from gateway.acp._forms import Elicited, form_answers, question_form
from gateway.acp._rpc import Connection, RpcError
from gateway.acp._updates import Ask, Question
from gateway.acp._wire import (
    ContentToolContent,
    PermissionOption,
    PermissionToolCall,
    RequestPermissionParams,
    TextBlock,
)
from runtime import KittiwakeError
from runtime.events import QuestionInfo, QuestionOption

__all__ = ["Asker"]

_log = logging.getLogger("kittiwake.acp")
_OPTIONS: Final = [
    PermissionOption(option_id="once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]
_REPLIES: Final[dict[str, Reply]] = {"once": "once", "always": "always", "reject": "reject"}
_DISMISS: Final = PermissionOption(option_id="dismiss", name="Dismiss", kind="reject_once")
_DONE: Final = PermissionOption(option_id="done", name="Done", kind="allow_once")


class _Selected(msgspec.Struct, frozen=True, rename="camel"):
    outcome: str
    option_id: str | None = None


class _PermissionAnswer(msgspec.Struct, frozen=True):
    outcome: _Selected


class Asker:
    """Puts requests to the client of *conn* and writes the answers through *backend*;
    *forms* says whether the client renders elicitation forms (asked at each question).

    Each method runs as a task of the prompt that raised it; the prompt's end cancels
    what is still waiting for the client.
    """

    def __init__(self, conn: Connection, backend: Backend, forms: Callable[[], bool]) -> None:
        self._conn = conn
        self._backend = backend
        self._forms = forms

    async def permission(self, session_id: str, ask: Ask) -> None:
        """Put a permission request to the client and write its answer as the request's
        durable reply (a cancelled request is rejected)."""
        params = RequestPermissionParams(
            session_id=session_id, tool_call=ask.tool_call, options=_OPTIONS
        )
        try:
            answer = await self._conn.request(
                "session/request_permission", params, _PermissionAnswer
            )
            chosen = answer.outcome.option_id if answer.outcome.outcome == "selected" else None
        except RpcError as exc:
            _log.warning("permission request refused by the client: %s", exc.message)
            chosen = None
        reply = _REPLIES.get(chosen or "", "reject")
        try:
            await self._backend.reply_permission(ask.session_id, ask.request_id, reply)
        except KittiwakeError as exc:  # answered elsewhere, or its call and session gone
            _log.info("permission %s already settled: %s", ask.request_id, exc)

    async def watch_children(self, session_id: str, nursery: trio.Nursery) -> None:
        """Put the permission requests of the session's subagent children to the client,
        until the prompt ends (which cancels this)."""
        async with aclosing(self._backend.descendant_asks(session_id)) as asks:
            async for info in asks:
                title = f"{info.agent}: {info.permission} {', '.join(info.resources)}".strip()
                call = PermissionToolCall(
                    tool_call_id=info.call_id or info.id, title=title, status="pending"
                )
                ask = Ask(session_id=info.session_id, request_id=info.id, tool_call=call)
                nursery.start_soon(self.permission, session_id, ask)

    async def question(self, session_id: str, question: Question) -> None:
        """Put *question*'s questions to the client and answer with the labels chosen: as
        one elicitation form when the client renders forms (``_forms``), else each as
        permission requests whose options are its choices (and "Dismiss"; one that allows
        several choices is asked again for each further choice, with "Done"). A question
        without choices (unless in a form), or one the client dismisses, declines or
        cancels, dismisses them all (the model is told so)."""
        try:
            if self._forms():
                form = question_form(session_id, question.call_id, question.questions)
                elicited = await self._conn.request("elicitation/create", form, Elicited)
                answers = form_answers(question.questions, elicited)
            else:
                answers = await self._choices(session_id, question)
        except RpcError as exc:
            _log.warning("question refused by the client: %s", exc.message)
            answers = None
        try:
            if answers is None:
                await self._backend.reject_question(question.session_id, question.request_id)
            else:
                await self._backend.reply_question(
                    question.session_id, question.request_id, answers
                )
        except KittiwakeError as exc:
            _log.info("question %s already settled: %s", question.request_id, exc)

    async def _choices(self, session_id: str, question: Question) -> list[list[str]] | None:
        """Each question as permission requests; ``None`` once one is dismissed."""
        answers: list[list[str]] = []
        for info in question.questions:
            if not info.options:
                return None
            picked: list[str] = []
            several = info.multiple is True
            while len(picked) < len(info.options):
                left = [(n, o) for n, o in enumerate(info.options) if o.label not in picked]
                chosen = await self._choose(session_id, question.call_id, info, left, picked)
                if chosen is None:
                    return None
                if chosen == _DONE.option_id:
                    break
                picked.append(info.options[int(chosen)].label)
                if not several:
                    break
            answers.append(picked)
        return answers

    async def _choose(
        self, session_id: str, call_id: str, info: QuestionInfo,
        left: list[tuple[int, QuestionOption]], picked: list[str],
    ) -> str | None:  # fmt: skip
        """One permission request for *info*: the option id chosen among *left* (or
        ``done``, offered once something was *picked*), ``None`` for a dismissal."""
        choices = [
            PermissionOption(option_id=str(n), name=o.label, kind="allow_once") for n, o in left
        ]
        done = [_DONE] if info.multiple is True and picked else []
        title = info.question + (f" (chosen: {', '.join(picked)})" if picked else "")
        details = "\n".join(f"{o.label}: {o.description}" for _, o in left)
        call = PermissionToolCall(
            tool_call_id=call_id, title=title, kind="other", status="pending",
            content=[ContentToolContent(content=TextBlock(text=details))],
        )  # fmt: skip
        params = RequestPermissionParams(
            session_id=session_id, tool_call=call, options=[*choices, *done, _DISMISS]
        )
        answer = await self._conn.request("session/request_permission", params, _PermissionAnswer)
        chosen = answer.outcome.option_id if answer.outcome.outcome == "selected" else None
        allowed = {c.option_id for c in choices} | {d.option_id for d in done}
        return chosen if chosen in allowed else None
