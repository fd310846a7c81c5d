"""The SSE streams and the websocket route: V2's ``/api/event`` (every session's durable
events and deltas) and ``/api/session/{id}/event``, and the SSE response other rooms stream
through (``sse_response``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Final

import msgspec
import trio
from quart import Response, websocket
from quart_trio import QuartTrio

from actors import OVERFLOWED, Notice
from gateway.http._args import after_arg
from gateway.http._guards import current_grant
from gateway.http._opencode import session_json
from gateway.http._routes import SSE, RouteTable
from gateway.http._wire import (
    delta_json,
    durable_event_json,
    encode,
    follow,
    paths_only,
)
from gateway.http._ws import serve_websocket
from runtime import LiveDelta
from runtime.events import SessionUpdated, decode_event
from storage import StoredEvent

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = ["Producer", "global_frame", "sse_frame", "sse_response", "stream_routes"]

_log = logging.getLogger("kittiwake.gateway")
_SESSION_UPDATED: Final = SessionUpdated.__struct_config__.tag


def sse_frame(data: bytes, *, event: str | None = None, id: str | None = None) -> bytes:
    """One ``text/event-stream`` frame."""
    head = b""
    if id is not None:
        head += b"id: " + id.encode() + b"\n"
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


Producer = Callable[[trio.MemorySendChannel[bytes]], Awaitable[None]]


def sse_response(app: QuartTrio, gw: Gateway, produce: Producer) -> Response:
    """Stream what *produce* sends; its task ends when the client leaves or the server stops."""
    send, receive = trio.open_memory_channel[bytes](gw.sse_buffer)
    scope = trio.CancelScope()
    gw.streams.add(scope)
    gw.access.watch(scope, current_grant())

    async def run() -> None:
        try:
            with scope:
                async with send:
                    await produce(send)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            _log.exception("event stream failed")
        finally:
            gw.streams.discard(scope)
            gw.access.streams.pop(scope, None)

    if gw.closing:
        scope.cancel()
    app.nursery.start_soon(run)

    async def body() -> AsyncIterator[bytes]:
        try:
            async with receive:
                async for chunk in receive:
                    yield chunk
        finally:
            scope.cancel()

    response = Response(
        body(), content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )  # fmt: skip
    response.timeout = None
    return response


def global_frame(item: StoredEvent | LiveDelta | Notice) -> bytes:
    if isinstance(item, Notice):  # a Location's notice (``mcp.tools.changed``)
        return sse_frame(encode({"type": item.type, "properties": item.properties}))
    if isinstance(item, StoredEvent) and item.type == _SESSION_UPDATED:
        # OpenCode's ``session.updated``: the client replaces its copy of the session.
        event = decode_event(item.data)
        assert isinstance(event, SessionUpdated)
        properties = {"sessionID": event.session_id, "info": session_json(event.info)}
        return sse_frame(
            encode({"id": item.id, "type": _SESSION_UPDATED, "properties": properties})
        )
    if isinstance(item, StoredEvent):
        data = msgspec.json.decode(item.data)
        kind = data.pop("type", item.type)
        body = {"id": item.id, "type": kind, "properties": paths_only(kind, data), "seq": item.seq}
    else:
        payload = delta_json(item)
        body = {"type": payload["type"], "properties": payload["data"]}
    return sse_frame(encode(body))


def stream_routes(table: RouteTable, app: QuartTrio, gw: Gateway) -> None:
    rt = gw.rt

    @table.get(
        "/api/session/{sessionID}/event", "v2.session.events", "Durable events (SSE)",
        answer=SSE, query=("after",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def session_events(session_id: str) -> Response:
        after = after_arg()
        await gw.check_session(session_id)

        async def produce(send: trio.MemorySendChannel[bytes]) -> None:
            async with follow(rt, session_id, after) as events:
                async for item in events:
                    payload = durable_event_json(item)
                    frame = sse_frame(encode(payload), event=payload["type"], id=str(item.seq))
                    await send.send(frame)

        return sse_response(app, gw, produce)

    @table.get(
        "/api/event", "v2.event.subscribe", "Every session's events and deltas (SSE)",
        answer=SSE,
    )  # fmt: skip
    async def all_events() -> Response:
        grant = current_grant()

        async def produce(send: trio.MemorySendChannel[bytes]) -> None:
            with rt.hub.subscribe(None) as sub:
                await send.send(sse_frame(encode({"type": "server.connected", "properties": {}})))
                beat = trio.current_time() + gw.heartbeat
                while True:
                    with trio.move_on_at(beat):
                        item = await sub.receive()
                        if item != OVERFLOWED and await gw.scope.sees(grant, item):
                            await send.send(global_frame(item))
                        continue
                    beat = trio.current_time() + gw.heartbeat
                    await send.send(
                        sse_frame(encode({"type": "server.heartbeat", "properties": {}}))
                    )

        return sse_response(app, gw, produce)

    @table.websocket("/api/ws", "kittiwake.ws", "The websocket gateway (JSON frames)")
    async def ws() -> None:
        await serve_websocket(gw, websocket)
