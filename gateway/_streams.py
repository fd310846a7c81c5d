"""The SSE streams and the websocket route: V2's ``/api/event`` (every session's durable
events and deltas) and ``/api/session/{id}/event``; OpenCode's V1 ``/event`` (flat
``{id, type, properties}``) and ``/global/event`` (``{directory, project, payload}``),
projected by ``gateway._v1_events``."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec
import trio
from quart import Response, request, websocket
from quart_trio import QuartTrio

from actors import OVERFLOWED
from gateway._diff import session_diffs
from gateway._opencode import session_json
from gateway._routes import SSE, RouteTable
from gateway._v1_events import Idle, Lookup, V1Projection
from gateway._v1_next import NextEvents, delivery_lookup
from gateway._wire import (
    GatewayError,
    delta_json,
    durable_event_json,
    encode,
    follow,
    paths_only,
)
from gateway._ws import serve_websocket
from runtime import IdGenerator, LiveDelta, SessionNotFoundError, UserMessage
from runtime.events import SessionUpdated, decode_event
from storage import MessageEntry, StoredEvent

if TYPE_CHECKING:
    from gateway._app import Gateway

__all__ = ["after_arg", "sse_frame", "stream_routes"]

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


def _sse(app: QuartTrio, gw: Gateway, produce: Producer) -> Response:
    """Stream what *produce* sends; its task ends when the client leaves or the server stops."""
    send, receive = trio.open_memory_channel[bytes](gw.sse_buffer)
    scope = trio.CancelScope()
    gw.streams.add(scope)

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


def after_arg() -> int | None:
    raw = request.args.get("after") or request.headers.get("Last-Event-ID")
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise GatewayError("InvalidRequestError", "after must be an integer seq") from None


def _global_frame(item: StoredEvent | LiveDelta) -> bytes:
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

        return _sse(app, gw, produce)

    @table.get(
        "/api/event", "v2.event.subscribe", "Every session's events and deltas (SSE)",
        answer=SSE,
    )  # fmt: skip
    async def all_events() -> Response:
        async def produce(send: trio.MemorySendChannel[bytes]) -> None:
            with rt.hub.subscribe(None) as sub:
                await send.send(sse_frame(encode({"type": "server.connected", "properties": {}})))
                beat = trio.current_time() + gw.heartbeat
                while True:
                    with trio.move_on_at(beat):
                        item = await sub.receive()
                        if item != OVERFLOWED:
                            await send.send(_global_frame(item))
                        continue
                    beat = trio.current_time() + gw.heartbeat
                    await send.send(
                        sse_frame(encode({"type": "server.heartbeat", "properties": {}}))
                    )

        return _sse(app, gw, produce)

    @table.get(
        "/event", "event.subscribe", "OpenCode's V1 events, flat (SSE)", answer=SSE,
        query=("directory",),
    )  # fmt: skip
    async def v1_events() -> Response:
        return _sse(app, gw, _v1_producer(gw, envelope=False))

    @table.get(
        "/global/event", "global.event", "OpenCode's V1 events in the global envelope (SSE)",
        answer=SSE,
    )  # fmt: skip
    async def v1_global_events() -> Response:
        return _sse(app, gw, _v1_producer(gw, envelope=True))

    @table.websocket("/api/ws", "kittiwake.ws", "The websocket gateway (JSON frames)")
    async def ws() -> None:
        await serve_websocket(gw, websocket)


def v1_lookup(gw: Gateway) -> Lookup:
    """What a V1 projection reads from *gw*'s runtime."""
    rt = gw.rt

    async def message(message_id: str) -> tuple[str, Any] | None:
        entry = await rt.storage.read(MessageEntry(message_id=message_id))
        return None if entry is None else (entry[0], entry[2])

    async def last_user(session_id: str) -> str | None:
        page = await rt.sessions.messages(session_id, limit=50, order="desc")
        for item in page.data:
            if isinstance(item, UserMessage):
                return item.id
        return None

    async def diff(session_id: str) -> list[dict[str, Any]]:
        return await session_diffs(rt, session_id)

    return Lookup(rt.sessions.get, message, last_user, rt.execution.default_model, diff)


async def _cut_short(gw: Gateway) -> list[dict[str, Any]]:
    """``session.status`` idle for each session a crash cut short (``needs_resume``) that is
    not running: OpenCode's UI does not reload a session when its event stream reconnects,
    so one that saw the session busy before the server restarted would wait for this idle
    forever. Raises what the storage read raises."""
    busy = set(gw.rt.sessions.active()) | gw.board.waiting
    return [
        {"type": "session.status", "properties": {"sessionID": sid, "status": {"type": "idle"}}}
        for sid in await gw.rt.sessions.needs_resume()
        if sid not in busy
    ]


def _v1_producer(gw: Gateway, *, envelope: bool) -> Producer:
    """A V1 stream: ``server.connected`` first, then ``session.status`` idle for each session
    a crash cut short (``_cut_short``), then, for each hub item, OpenCode's V2 events it
    makes (``gateway._v1_next``) followed by its V1 projection, a ``server.heartbeat`` every
    ``gw.heartbeat`` seconds. An item of a session deleted meanwhile is dropped."""
    rt = gw.rt
    ids = IdGenerator()
    project = str(rt.sessions.project_id)
    home = str(gw.directory.resolve())
    directories: dict[str, str] = {}

    async def frame(payload: dict[str, Any]) -> bytes:
        payload = {"id": ids.new("evt"), **payload}
        if not envelope:
            return sse_frame(encode(payload))
        props = payload["properties"]
        sid = props.get("sessionID")
        directory = home
        if isinstance(props.get("info"), dict) and "directory" in props["info"]:
            directory = props["info"]["directory"]
        elif isinstance(sid, str):
            if sid not in directories:
                try:
                    directories[sid] = (await rt.sessions.get(sid)).location.directory
                except SessionNotFoundError:
                    directories[sid] = home
            directory = directories[sid]
        return sse_frame(encode({"directory": directory, "project": project, "payload": payload}))

    async def produce(send: trio.MemorySendChannel[bytes]) -> None:
        since = int(time.time() * 1000)
        lookup = v1_lookup(gw)
        projection = V1Projection(lookup, gw.live, gw.board.busy, since=since)
        nexts = NextEvents(lookup, delivery_lookup(rt))
        with rt.hub.subscribe(None) as sub:
            gw.board.add(sub)
            try:
                await send.send(await frame({"type": "server.connected", "properties": {}}))
                for payload in await _cut_short(gw):
                    await send.send(await frame(payload))
                beat = trio.current_time() + gw.heartbeat
                while True:
                    with trio.move_on_at(beat):
                        item = await sub.receive()
                        if item == OVERFLOWED:
                            projection.reset()
                            nexts.reset()
                            continue
                        try:
                            payloads = []
                            if isinstance(item, StoredEvent | LiveDelta):
                                payloads = await nexts.feed(item)
                            payloads += await projection.feed(cast(Any, item))
                        except SessionNotFoundError:
                            payloads = []
                        for payload in payloads:
                            await send.send(await frame(payload))
                        if isinstance(item, Idle):
                            gw.board.delivered(item.session_id, sub)
                        continue
                    beat = trio.current_time() + gw.heartbeat
                    await send.send(await frame({"type": "server.heartbeat", "properties": {}}))
            finally:
                gw.board.remove(sub)

    return produce
