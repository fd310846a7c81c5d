"""What the agent asks the client on a session's behalf: a tool call's permission (its
answer written as the request's durable reply), the permission requests of the session's
subagent children, and the ``question`` tool's questions (as permission requests whose
options are the question's choices)."""

from __future__ import annotations

import logging
from contextlib import aclosing
from typing import Final

import msgspec
import trio

from gateway.acp._backend import Backend, Reply
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

__all__ = ["Asker"]

_log = logging.getLogger("kittiwake.acp")
_OPTIONS: Final = [
    PermissionOption(option_id="once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]
_REPLIES: Final[dict[str, Reply]] = {"once": "once", "always": "always", "reject": "reject"}
_DISMISS: Final = PermissionOption(option_id="dismiss", name="Dismiss", kind="reject_once")


class _Selected(msgspec.Struct, frozen=True, rename="camel"):
    outcome: str
    option_id: str | None = None


class _PermissionAnswer(msgspec.Struct, frozen=True):
    outcome: _Selected


class Asker:
    """Puts requests to the client of *conn* and writes the answers through *backend*.

    Each method runs as a task of the prompt that raised it; the prompt's end cancels
    what is still waiting for the client.
    """

    def __init__(self, conn: Connection, backend: Backend) -> None:
        self._conn = conn
        self._backend = backend

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
        """Put each of *question*'s questions to the client as a permission request whose
        options are its choices (and "Dismiss"), then answer with the labels chosen; a
        question that is not a single choice, or one the client dismisses or cancels,
        dismisses them all (the model is told so)."""
        answers: list[list[str]] | None = []
        for info in question.questions:
            if info.multiple is True or not info.options or answers is None:
                answers = None
                break
            choices = [
                PermissionOption(option_id=str(n), name=o.label, kind="allow_once")
                for n, o in enumerate(info.options)
            ]
            details = "\n".join(f"{o.label}: {o.description}" for o in info.options)
            call = PermissionToolCall(
                tool_call_id=question.call_id, title=info.question, kind="other",
                status="pending", content=[ContentToolContent(content=TextBlock(text=details))],
            )  # fmt: skip
            params = RequestPermissionParams(
                session_id=session_id, tool_call=call, options=[*choices, _DISMISS]
            )
            try:
                answer = await self._conn.request(
                    "session/request_permission", params, _PermissionAnswer
                )
            except RpcError as exc:
                _log.warning("question refused by the client: %s", exc.message)
                answers = None
                break
            chosen = answer.outcome.option_id if answer.outcome.outcome == "selected" else None
            if chosen is None or not chosen.isdigit() or int(chosen) >= len(info.options):
                answers = None
                break
            answers.append([info.options[int(chosen)].label])
        try:
            if answers is None:
                await self._backend.reject_question(question.session_id, question.request_id)
            else:
                await self._backend.reply_question(
                    question.session_id, question.request_id, answers
                )
        except KittiwakeError as exc:
            _log.info("question %s already settled: %s", question.request_id, exc)
