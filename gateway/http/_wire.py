"""Wire shapes shared by the HTTP routes, SSE streams and the websocket gateway."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, aclosing
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import msgspec

from actors import SessionEvent

if TYPE_CHECKING:
    from actors import Runtime
from runtime import (
    InvalidSessionInputError,
    KittiwakeError,
    LiveDelta,
    Location,
    ModelRef,
    Prompt,
    ResumeNotNeededError,
    SessionNotFoundError,
)
from runtime import events as ev
from runtime.revert import MessageNotFoundError, SessionBusyError

__all__ = [
    "STATUS_BY_TAG",
    "AgentBody",
    "CreateBody",
    "GatewayError",
    "ModelBody",
    "PermissionReplyBody",
    "PromptBody",
    "QuestionReplyBody",
    "decode_body",
    "delta_json",
    "durable_event_json",
    "encode",
    "error_body",
    "error_for",
    "find_permission",
    "follow",
    "paths_only",
    "permission_json",
    "reply_permission",
]

STATUS_BY_TAG: Final[dict[str, int]] = {
    "BadRequest": 400,
    "InvalidInputError": 400,
    "InvalidRequestError": 400,
    "InvalidCursorError": 400,
    "ProviderAuthOauthMissing": 400,
    "ProviderAuthOauthCodeMissing": 400,
    "ProviderAuthOauthCallbackFailed": 400,
    "ProviderAuthValidationFailed": 400,
    "UnauthorizedError": 401,
    "ForbiddenError": 403,
    "SessionNotFoundError": 404,
    "MessageNotFoundError": 404,
    "PermissionNotFoundError": 404,
    "QuestionNotFoundError": 404,
    "McpServerNotFoundError": 404,
    "NotFoundError": 404,
    "ConflictError": 409,
    "ResumeNotNeededError": 409,
    "SessionBusyError": 409,
    "MethodNotAllowedError": 405,
    "PayloadTooLargeError": 413,
    "RateLimitedError": 429,
    "TooManyRequestsError": 429,
    "ServiceUnavailableError": 503,
    "OperationUnavailableError": 503,
    "NotImplementedError": 501,
}
# The runtime's tags travel under OpenCode's names where those differ.
_WIRE_TAG: Final = {
    "InvalidInputError": "InvalidRequestError",
    "OperationUnavailableError": "ServiceUnavailableError",
    "StorageError": "UnknownError",
}

encode = msgspec.json.Encoder().encode
T = TypeVar("T")


class GatewayError(Exception):
    """An error answered as ``{"_tag", "message", ...}`` with an HTTP status; a *named* one
    in OpenCode's V1 shape ``{"name": tag, "data": {"message", ...}}``."""

    def __init__(
        self, tag: str, message: str, *, status: int | None = None, named: bool = False,
        **extra: str,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.tag = tag
        self.message = message
        self.status = status if status is not None else STATUS_BY_TAG.get(tag, 500)
        self.named = named
        self.extra = extra


def error_for(exc: KittiwakeError) -> GatewayError:
    """Translate a runtime error to its wire tag and status."""
    tag = _WIRE_TAG.get(exc.tag, exc.tag)
    status = STATUS_BY_TAG.get(exc.tag, 500)
    if isinstance(exc, SessionNotFoundError | ResumeNotNeededError):
        return GatewayError(tag, exc.message, status=status, sessionID=exc.session_id)
    if isinstance(exc, InvalidSessionInputError):
        return GatewayError(tag, exc.message, status=status, field=exc.field)
    if isinstance(exc, MessageNotFoundError):
        return GatewayError(
            tag, exc.message, status=status, sessionID=exc.session_id, messageID=exc.message_id
        )
    if isinstance(exc, SessionBusyError):
        return GatewayError(tag, exc.message, status=status, sessionID=exc.session_id)
    return GatewayError(tag, exc.message, status=status)


def error_body(error: GatewayError) -> dict[str, Any]:
    if error.named:
        return {"name": error.tag, "data": {"message": error.message, **error.extra}}
    return {"_tag": error.tag, "message": error.message, **error.extra}


class CreateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str | None = None
    agent: str | None = None
    model: ModelRef | None = None
    location: Location | None = None
    title: str | None = None


class PromptBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    prompt: Prompt
    id: str | None = None
    delivery: ev.Delivery = "steer"
    resume: bool = True


class AgentBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    agent: str


class ModelBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    model: ModelRef


class PermissionSource(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's ``PermissionV2Source``: the tool call a client's request is for."""

    type: Literal["tool"]
    messageID: str
    callID: str


class PermissionCreateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's permission create: evaluate, and record a request when approval is needed."""

    action: str
    resources: list[str]
    id: str | None = None
    save: list[str] | None = None
    metadata: dict[str, Any] | None = None
    source: PermissionSource | None = None
    agent: str | None = None


class PermissionReplyBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's ``PermissionV2Reply`` values are the runtime's replies, one for one.

    ``message`` is accepted for compatibility; the runtime records no reply message.
    """

    reply: Literal["once", "always", "reject"]
    message: str | None = None


def permission_json(info: ev.PermissionInfo) -> dict[str, Any]:
    """OpenCode's ``PermissionV2Request``: the runtime's ``permission`` is its ``action``.

    The tool, its call id, the asking agent, the status and the creation time travel in
    ``metadata`` (``source`` needs a message id, which a permission request does not record).
    """
    body: dict[str, Any] = {
        "id": info.id,
        "sessionID": info.session_id,
        "action": info.permission,
        "resources": list(info.resources),
        "metadata": {
            **(info.metadata if isinstance(info.metadata, dict) else {}),
            "tool": info.tool, "callID": info.call_id, "agent": info.agent,
            "status": info.status, "timeCreated": info.time_created,
        },
    }  # fmt: skip
    if isinstance(info.save, list):
        body["save"] = list(info.save)
    if isinstance(info.message_id, str) and info.call_id:
        body["source"] = {"type": "tool", "messageID": info.message_id, "callID": info.call_id}
    return body


async def find_permission(rt: Runtime, session_id: str, request_id: str) -> ev.PermissionInfo:
    """The request *request_id* of the session, or of a subagent child running under one
    of its task calls; 404 ``PermissionNotFoundError`` otherwise.

    Raises SessionNotFoundError when the session does not exist.
    """
    for info in await rt.sessions.permissions(session_id):
        if info.id == request_id:
            return info
    for child in rt.tools.running_descendants(session_id):
        with contextlib.suppress(SessionNotFoundError):  # deleted meanwhile
            for info in await rt.sessions.permissions(child):
                if info.id == request_id:
                    return info
    raise GatewayError(
        "PermissionNotFoundError", f"Permission request not found: {request_id}",
        requestID=request_id,
    )  # fmt: skip


async def reply_permission(
    rt: Runtime, session_id: str, request_id: str, body: PermissionReplyBody
) -> None:
    """Answer a permission request (of the session, or of a subagent child running under
    it: ``find_permission``); the waiting tool call proceeds or fails.

    Raises 404 (session or request unknown) and ``ConflictError`` when already answered.
    Cancellation before the runtime accepts the reply leaves the request pending.
    """
    info = await find_permission(rt, session_id, request_id)
    await rt.sessions.reply_permission(info.session_id, request_id, body.reply)


def decode_body(data: bytes, kind: type[T], *, empty_ok: bool = False) -> T:
    """Decode a JSON request body into *kind*; raise a 400 ``InvalidRequestError`` otherwise."""
    if not data.strip() and empty_ok:
        data = b"{}"
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise GatewayError("InvalidRequestError", f"Invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise GatewayError("InvalidRequestError", f"Malformed JSON: {exc}") from None


_WITH_FILES: Final = frozenset(
    {ev.FileBeforeImage.__struct_config__.tag, ev.SessionReverted.__struct_config__.tag}
)


def paths_only(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """*data* of an event of type *kind* as clients get it: the files a before-image
    (``session.tool.file.before``) or a revert (``session.reverted``) holds are listed by
    path, without their content (up to 1 MiB each, which only revert reads back)."""
    if kind in _WITH_FILES:
        data["files"] = [{"path": f["path"]} for f in data.get("files", [])]
    return data


def durable_event_json(item: SessionEvent) -> dict[str, Any]:
    """OpenCode's ``SessionDurableEvent``: ``{id, type, durable, data}``; Kittiwake's own
    fields of an event (``Event.LOCAL_FIELDS``) go in the envelope's ``metadata``. Any
    event of the session's log takes this shape, Kittiwake's own types too (files by
    path: ``paths_only``)."""
    event = item.event
    data = msgspec.to_builtins(event)
    kind = data.pop("type")
    paths_only(kind, data)
    out = {
        "id": item.id,
        "type": kind,
        "durable": {
            "aggregateID": event.session_id,
            "seq": item.seq,
            "version": type(event).VERSION,
        },
        "data": data,
    }
    local = type(event).LOCAL_FIELDS
    if local:
        fields = {ev.wire_name(name) for name in local}
        out["metadata"] = {name: data.pop(name) for name in fields if name in data}
    return out


def delta_json(delta: LiveDelta) -> dict[str, Any]:
    """A live-only delta as ``{type, data}`` (never stored, no sequence number)."""
    data = msgspec.to_builtins(delta)
    kind = data.pop("type")
    return {"type": kind, "data": data}


def follow(
    rt: Runtime, session_id: str, after: int | None
) -> AbstractAsyncContextManager[AsyncGenerator[SessionEvent, None]]:
    """``rt.sessions.follow`` closed on exit, however the consumer leaves."""
    events = cast(AsyncGenerator[SessionEvent, None], rt.sessions.events(session_id, after=after))
    return aclosing(events)


class QuestionReplyBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The user's answers in order of the questions, each a list of chosen labels."""

    answers: list[list[str]]
