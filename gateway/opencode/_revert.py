"""Revert routes: OpenCode's V1 ``/session/{id}/revert`` and ``/unrevert`` (the terminal UI's
``/undo`` and ``/redo``) and the V2 ``/api/session/{id}/revert/stage|commit|clear``, all on
``rt.sessions.reverts`` (``actors.Reverts``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
from quart import Response

from gateway.http import NO_CONTENT, Answer, GatewayError, RouteTable, encode, session_json
from runtime import SessionMessage
from runtime import messages as m
from runtime.inbox import check_id

if TYPE_CHECKING:
    from actors import Reverted, Runtime
    from gateway.opencode._state import OpenCodeGateway

__all__ = ["RevertIn", "StageIn", "revert_json", "revert_routes", "revert_session"]

_OBJECT: Final = Answer(type=dict[str, Any])
_PART: Final = re.compile(r"^prt_(?P<message>.+)_(?P<index>\d{4,})$")
_ERRORS: Final = ("InvalidRequestError", "MessageNotFoundError", "SessionBusyError")


class RevertIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's ``POST /session/{id}/revert`` body."""

    messageID: str
    partID: str | None = None


class StageIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's V2 ``revert/stage`` body: ``files`` false rolls back the history only."""

    messageID: str
    files: bool = True


async def revert_session(
    rt: Runtime, session_id: str, message_id: str, part_id: str | None = None, *,
    files: bool = True,
) -> Reverted:  # fmt: skip
    """Revert *session_id* to *message_id* and the V1 part *part_id* (``prt_<message>_<NNNN>``,
    the message's NNNN-th part; a part that is not an assistant message's content, such as
    its step-start, means the whole message).

    Raises GatewayError (InvalidRequestError: a malformed id), and what
    ``Reverts.revert`` raises.
    """
    _check("msg", message_id, "messageID")
    content = None
    if part_id is not None:
        content = await _content_id(rt, session_id, message_id, part_id)
    return await rt.sessions.reverts.revert(
        session_id, message_id, content, files=files, part_name=part_id
    )


def revert_json(reverted: Reverted) -> dict[str, Any]:
    """OpenCode's V2 ``RevertState`` of a revert."""
    info = reverted.info
    body: dict[str, Any] = {"messageID": "", "files": msgspec.to_builtins(reverted.files)}
    if not isinstance(info.revert, msgspec.UnsetType):
        body["messageID"] = info.revert.message_id
        if isinstance(info.revert.part_id, str):
            body["partID"] = info.revert.part_id
    return body


def revert_routes(table: RouteTable, gw: OpenCodeGateway) -> None:
    """Declare the V1 and V2 revert routes."""
    rt = gw.rt

    def idle(session_id: str) -> None:
        if session_id in gw.shells:  # a user's shell command runs
            raise GatewayError(
                "SessionBusyError", f"Session {session_id} is busy; wait until it is idle or "
                "abort it", status=409, sessionID=session_id,
            )  # fmt: skip

    @table.post(
        "/session/{sessionID}/revert", "session.revert",
        "Roll the session back to a message, restoring the files Kittiwake's file tools "
        "changed after it", body=RevertIn, answer=_OBJECT, errors=_ERRORS,
    )  # fmt: skip
    async def revert(body: RevertIn, session_id: str) -> Response:
        idle(session_id)
        reverted = await revert_session(rt, session_id, body.messageID, body.partID)
        return _json(session_json(reverted.info))

    @table.post(
        "/session/{sessionID}/unrevert", "session.unrevert",
        "Show the reverted messages again and write the reverted files back",
        answer=_OBJECT, errors=("SessionBusyError",),
    )  # fmt: skip
    async def unrevert(session_id: str) -> Response:
        idle(session_id)
        return _json(session_json(await rt.sessions.reverts.unrevert(session_id)))

    @table.post(
        "/api/session/{sessionID}/revert/stage", "v2.session.revert.stage",
        "Stage or move a revert boundary and optionally apply its file changes", body=StageIn,
        answer=Answer(type=dict[str, Any], envelope="data"), errors=_ERRORS,
    )  # fmt: skip
    async def stage(body: StageIn, session_id: str) -> Response:
        idle(session_id)
        reverted = await revert_session(rt, session_id, body.messageID, files=body.files)
        return _json({"data": revert_json(reverted)})

    @table.post(
        "/api/session/{sessionID}/revert/commit", "v2.session.revert.commit",
        "Drop the staged revert's messages for good", answer=NO_CONTENT,
    )  # fmt: skip
    async def commit(session_id: str) -> Response:
        await rt.sessions.reverts.commit(session_id)
        return Response(b"", status=204)

    @table.post(
        "/api/session/{sessionID}/revert/clear", "v2.session.revert.clear",
        "Clear the staged revert: messages and files come back", answer=NO_CONTENT,
        errors=("SessionBusyError",),
    )  # fmt: skip
    async def clear(session_id: str) -> Response:
        idle(session_id)
        await rt.sessions.reverts.unrevert(session_id)
        return Response(b"", status=204)


async def _content_id(rt: Runtime, session_id: str, message_id: str, part_id: str) -> str | None:
    """The content id a V1 part id names in the message (None: the whole message)."""
    _check("prt", part_id, "partID")
    found = _PART.match(part_id)
    if found is None or f"msg_{found['message']}" != message_id:
        raise GatewayError(
            "InvalidRequestError", f"partID {part_id} is not a part of message {message_id}"
        )
    message = await _message(rt, session_id, message_id)
    index = int(found["index"]) - 1  # part 0 is the step-start
    if isinstance(message, m.AssistantMessage) and 0 <= index < len(message.content):
        return message.content[index].id
    return None


async def _message(rt: Runtime, session_id: str, message_id: str) -> SessionMessage | None:
    cursor: str | None = None
    while True:
        page = await rt.sessions.messages(session_id, limit=200, order="asc", cursor=cursor)
        for item in page.data:
            if item.id == message_id:
                return item  # type: ignore[return-value]
        cursor = page.next
        if cursor is None:
            return None


def _check(prefix: Literal["msg", "prt"], value: str, name: str) -> None:
    try:
        check_id(prefix, value)
    except ValueError as exc:
        raise GatewayError("InvalidRequestError", f"{name}: {exc}") from None


def _json(body: Any) -> Response:
    return Response(encode(body), status=200, content_type="application/json")
