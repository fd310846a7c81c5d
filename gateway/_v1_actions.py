"""OpenCode's V1 session actions besides prompting: ``POST /session/{id}/fork`` (a new
session with a copy of the history before a message) and ``POST /session/{id}/shell`` (the
user runs a command through the session's shell tool)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import msgspec
from quart import Response

from actors import fork_session
from gateway._opencode import session_json
from gateway._routes import Answer, RouteTable
from gateway._wire import encode
from runtime import IdGenerator

if TYPE_CHECKING:
    from gateway._app import Gateway

__all__ = ["ForkBody", "v1_action_routes"]

_OBJECT: Final = Answer(type=dict[str, Any])


class ForkBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's fork: the history before *messageID* (all of it without one)."""

    messageID: str | None = None  # noqa: N815 - OpenCode's field name


def _json(body: Any) -> Response:
    return Response(encode(body), content_type="application/json")


def v1_action_routes(table: RouteTable, gw: Gateway, *, max_messages: int) -> None:
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
