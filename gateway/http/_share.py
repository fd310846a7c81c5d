"""Sharing a session by link, on this server (OpenCode's ``share``).

``POST /api/session/{id}/share`` gives a session a read-only link,
``<origin>/s/<sessionID>/<secret>/``, where the secret is 256 random bits
(``secrets.token_urlsafe``); the link is stored with the session (a durable
``session.updated`` carrying ``share: {url, secret}``), so it survives a restart, and a
session already shared keeps its link. ``DELETE`` takes it away. The configuration's
``share`` (``manual``, the default, ``auto``: every new session is shared, ``disabled``:
sharing is refused) is read from the session's Location.

Under the link, without the password, a few reads of that one session answer
(``shared_routes``): its info, its messages, its history after a seq, its todo list,
whether it runs, and its live stream (durable events and deltas, heartbeats), which ends when the session is
unshared. A wrong secret, an unknown or unshared session all answer 404 ``NotFoundError``,
alike.
"""

from __future__ import annotations

import hmac
import secrets
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from quart import Response, request
from quart_trio import QuartTrio

from actors import OVERFLOWED
from gateway.http._args import after_arg, int_arg, page_json
from gateway.http._routes import JSON, SSE, Answer, RouteTable
from gateway.http._streams import global_frame, sse_frame, sse_response
from gateway.http._wire import GatewayError, durable_event_json, encode
from runtime import SessionInfo, SessionNotFoundError
from runtime.events import SessionDeleted, SessionUpdated, ShareInfo, decode_event
from storage import SetShare, StoredEvent

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = [
    "SHARING_DISABLED",
    "share_if_auto",
    "share_session",
    "share_setting",
    "shared_routes",
    "shared_session",
    "unshare_session",
]

SHARING_DISABLED: Final = "Sharing is disabled in this configuration (share: disabled)"
"""The message refusing to share (OpenCode's clients look for "disabled")."""
_SECRET_BYTES: Final = 32
_BASE: Final = "/s/{sessionID}/{secret}"


async def share_setting(gw: Gateway, directory: str) -> str:
    """The ``share`` setting of the Location of *directory*: ``manual`` when unset."""
    location = await gw.rt.execution.current_location(directory)
    value = location.settings.loaded.data.get("share")
    return value if value in ("auto", "disabled") else "manual"


async def share_session(gw: Gateway, session_id: str) -> SessionInfo:
    """Share the session (its link starts with the address the request came to); a session
    already shared keeps its link. The info after it.

    Raises SessionNotFoundError; GatewayError ``BadRequest`` (400) when the Location's
    configuration says ``share: "disabled"``. Cancellation before the write is
    acknowledged leaves the session shared or not, never half-shared.
    """
    info = await gw.rt.sessions.get(session_id)
    if await share_setting(gw, info.location.directory) == "disabled":
        raise GatewayError("BadRequest", SHARING_DISABLED)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    url = f"{request.scheme}://{request.host}/s/{session_id}/{secret}/"
    share = ShareInfo(url=url, secret=secret)
    return await _write(gw, session_id, share)


async def share_if_auto(gw: Gateway, info: SessionInfo) -> SessionInfo:
    """A session just created, shared when its Location's configuration says
    ``share: "auto"`` (``share_session``), else *info* as it is."""
    if await share_setting(gw, info.location.directory) != "auto":
        return info
    return await share_session(gw, info.id)


async def unshare_session(gw: Gateway, session_id: str) -> SessionInfo:
    """Take the session's link away (its readers get 404 from now on, and their live
    streams end); the info after it, unchanged when it was not shared.

    Raises SessionNotFoundError.
    """
    return await _write(gw, session_id, None)


async def _write(gw: Gateway, session_id: str, share: ShareInfo | None) -> SessionInfo:
    info = await gw.rt.storage.write(
        SetShare(session_id=session_id, share=share, timestamp=gw.rt.execution.now_ms())
    )
    if info is None:
        raise SessionNotFoundError(session_id)
    return info


def _opens(info: SessionInfo, secret: str) -> bool:
    share = info.share
    if isinstance(share, msgspec.UnsetType):
        return False
    return hmac.compare_digest(share.secret.encode(), secret.encode())


async def shared_session(gw: Gateway, session_id: str, secret: str) -> SessionInfo:
    """The session *session_id* if *secret* opens it (it is shared with that secret).

    Raises GatewayError ``NotFoundError`` (404) otherwise, the same for a wrong secret, an
    unknown session and one not shared.
    """
    try:
        info = await gw.rt.sessions.get(session_id)
    except SessionNotFoundError:
        info = None
    if info is None or not _opens(info, secret):
        raise GatewayError("NotFoundError", "No such shared session")
    return info


def _json(body: object) -> Response:
    return Response(encode(body), status=200, content_type=JSON)


def shared_routes(table: RouteTable, app: QuartTrio, gw: Gateway) -> None:
    """The reads under a session's link, open without the password (``public``)."""
    rt = gw.rt
    found = ("NotFoundError",)

    @table.get(
        _BASE + "/api/session", "kittiwake.share.session", "A shared session",
        answer=Answer(type=SessionInfo, envelope="data"), errors=found, public=True,
    )  # fmt: skip
    async def session(session_id: str, secret: str) -> Response:
        return _json({"data": await shared_session(gw, session_id, secret)})

    @table.get(
        _BASE + "/api/session/message", "kittiwake.share.messages",
        "A shared session's messages (newest first)", answer=Answer(type=dict[str, Any]),
        query=("limit", "cursor"), errors=(*found, "InvalidRequestError", "InvalidCursorError"),
        public=True,
    )  # fmt: skip
    async def messages(session_id: str, secret: str) -> Response:
        await shared_session(gw, session_id, secret)
        page = await rt.sessions.messages(
            session_id, limit=int_arg("limit", 50), order="desc", cursor=request.args.get("cursor")
        )
        return _json(page_json(page.data, page.previous, page.next))

    @table.get(
        _BASE + "/api/session/history", "kittiwake.share.history",
        "A shared session's durable events after a seq", answer=Answer(type=dict[str, Any]),
        query=("after", "limit"), errors=(*found, "InvalidRequestError"), public=True,
    )  # fmt: skip
    async def history(session_id: str, secret: str) -> Response:
        await shared_session(gw, session_id, secret)
        page, more = await rt.sessions.history(
            session_id, after=after_arg(), limit=int_arg("limit", 100)
        )
        return _json({"data": [durable_event_json(item) for item in page], "hasMore": more})

    @table.get(
        _BASE + "/api/session/todo", "kittiwake.share.todo", "A shared session's todo list",
        answer=Answer(type=dict[str, Any]), errors=found, public=True,
    )  # fmt: skip
    async def todo(session_id: str, secret: str) -> Response:
        await shared_session(gw, session_id, secret)
        return _json({"data": await rt.tools.todos(session_id)})

    @table.get(
        _BASE + "/api/session/active", "kittiwake.share.active",
        "Whether a shared session runs now", answer=Answer(type=dict[str, Any]),
        errors=found, public=True,
    )  # fmt: skip
    async def active(session_id: str, secret: str) -> Response:
        await shared_session(gw, session_id, secret)
        running = session_id in rt.sessions.active()
        return _json({"data": {session_id: {"type": "running"}} if running else {}})

    @table.get(
        _BASE + "/api/event", "kittiwake.share.event",
        "A shared session's events and deltas (SSE); ends when it is unshared", answer=SSE,
        errors=found, public=True,
    )  # fmt: skip
    async def events(session_id: str, secret: str) -> Response:
        await shared_session(gw, session_id, secret)

        async def produce(send: trio.MemorySendChannel[bytes]) -> None:
            with rt.hub.subscribe(session_id) as sub:
                await send.send(sse_frame(encode({"type": "server.connected", "properties": {}})))
                beat = trio.current_time() + gw.heartbeat
                while True:
                    with trio.move_on_at(beat):
                        item = await sub.receive()
                        if item == OVERFLOWED:
                            return  # the reader reconnects and catches up by seq
                        await send.send(global_frame(item))
                        if _unshared(item, secret):
                            return
                        continue
                    beat = trio.current_time() + gw.heartbeat
                    await send.send(
                        sse_frame(encode({"type": "server.heartbeat", "properties": {}}))
                    )

        return sse_response(app, gw, produce)


def _unshared(item: object, secret: str) -> bool:
    """Whether *item* is a ``session.updated`` after which *secret* no longer opens the
    session (or the session's deletion)."""
    if not isinstance(item, StoredEvent):
        return False
    if item.type == SessionDeleted.__struct_config__.tag:
        return True
    if item.type != SessionUpdated.__struct_config__.tag:
        return False
    event = decode_event(item.data)
    return isinstance(event, SessionUpdated) and not _opens(event.info, secret)
