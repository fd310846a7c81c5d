"""OpenCode's V1 session actions besides prompting: ``POST /session/{id}/fork`` (a new
session with a copy of the history before a message) and ``POST /session/{id}/shell`` (the
user runs a command through the session's shell tool)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from quart import Response

from actors import fork_session, run_user_shell
from gateway.http import Answer, GatewayError, RouteTable, encode, session_json
from gateway.opencode._transcript import message_in, transcript
from gateway.opencode._v1 import SETTLE_TIMEOUT, ModelIn
from runtime import IdGenerator

if TYPE_CHECKING:
    from gateway.opencode._state import OpenCodeGateway

__all__ = ["ForkBody", "ShellBody", "UserShell", "v1_action_routes"]

_OBJECT: Final = Answer(type=dict[str, Any])


@dataclass
class UserShell:
    """A user's shell command running in a session: abort cancels *scope*; the V1 idle
    waiter waits for *ended*."""

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    ended: trio.Event = field(default_factory=trio.Event)


class ShellBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's shell: the command, the agent it runs as, the model the record names."""

    command: str
    agent: str | None = None
    model: ModelIn | None = None
    messageID: str | None = None  # noqa: N815 - OpenCode's field name


class ForkBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's fork: the history before *messageID* (all of it without one)."""

    messageID: str | None = None  # noqa: N815 - OpenCode's field name


def _json(body: Any) -> Response:
    return Response(encode(body), content_type="application/json")


def v1_action_routes(table: RouteTable, gw: OpenCodeGateway, *, max_messages: int) -> None:
    """Declare the fork and shell routes (*max_messages*: the most a fork copies)."""
    rt = gw.rt
    ids = IdGenerator()

    @table.post(
        "/session/{sessionID}/fork", "session.fork",
        "A new session with a copy of the history before messageID", body=ForkBody,
        answer=_OBJECT, query=("directory",), errors=("InvalidRequestError",), empty_ok=True,
    )  # fmt: skip
    async def fork(body: ForkBody, session_id: str) -> Response:
        """Fork durably (one batch); cancellation may leave the fork written."""
        info = await fork_session(
            rt, session_id, before=body.messageID, max_messages=max_messages, ids=ids,
            now=int(time.time() * 1000),
        )  # fmt: skip
        return _json(session_json(info))

    @table.post(
        "/session/{sessionID}/shell", "session.shell",
        "Run a command with the session's shell tool; the assistant message recording it",
        body=ShellBody, answer=_OBJECT, query=("directory",),
        errors=("InvalidRequestError", "SessionBusyError"),
    )  # fmt: skip
    async def shell(body: ShellBody, session_id: str) -> Response:
        """Run the command (409 while the session runs a turn or another command), then
        answer ``{info, parts}`` of the assistant message recording it once the V1 streams
        sent it. Cancellation (client gone, abort) stops the command; its record, failed
        "Tool execution interrupted", is still written."""
        if not body.command.strip():
            raise GatewayError("InvalidRequestError", "command must not be empty")
        await gw.check_session(session_id)
        if session_id in gw.shells or session_id in rt.sessions.active():
            raise GatewayError(
                "SessionBusyError", f"Session {session_id} is busy", status=409,
                sessionID=session_id,
            )  # fmt: skip
        model = body.model.ref() if body.model is not None else None
        if await rt.sessions.reverts.standing(session_id):
            await rt.sessions.reverts.commit(session_id)  # as a prompt does: drop the tail
        running = gw.shells[session_id] = UserShell()
        gw.board.announce(session_id)  # busy now: the UI's spinner, and abort enabled
        assistant_id = ""
        try:
            with running.scope:
                _, assistant_id = await run_user_shell(
                    rt, session_id, body.command, agent=body.agent, model=model, ids=ids,
                    now=lambda: int(time.time() * 1000),
                )  # fmt: skip
        finally:
            del gw.shells[session_id]
            running.ended.set()  # the streams' idle waiter goes on, after the record
        with trio.move_on_after(SETTLE_TIMEOUT):
            await gw.board.settled(session_id)
        items = await transcript(rt, session_id, limit=max_messages)
        if not assistant_id:  # interrupted: its record is the last message
            return _json(items[-1])
        return _json(message_in(items, session_id, assistant_id))
