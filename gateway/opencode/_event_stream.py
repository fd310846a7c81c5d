"""OpenCode's V1 event streams: ``/event`` (flat ``{id, type, properties}``) and
``/global/event`` (``{directory, project, payload}``), each event of the hub as OpenCode's
V2 events (``_v1_next``) followed by its V1 projection (``_v1_events``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

import trio
from quart import Response
from quart_trio import QuartTrio

from actors import OVERFLOWED, Notice
from gateway.http import (
    SSE,
    Producer,
    RouteTable,
    current_grant,
    encode,
    project_filter,
    sse_frame,
    sse_response,
)
from gateway.opencode._diff import session_diffs
from gateway.opencode._v1_events import Idle, Lookup, V1Projection
from gateway.opencode._v1_next import NextEvents, delivery_lookup
from runtime import (
    IdGenerator,
    InvalidSessionInputError,
    LiveDelta,
    SessionNotFoundError,
    UserMessage,
)
from storage import MessageEntry, StoredEvent

if TYPE_CHECKING:
    from gateway.opencode._state import OpenCodeGateway

__all__ = ["v1_lookup", "v1_stream_routes"]


def v1_stream_routes(table: RouteTable, app: QuartTrio, gw: OpenCodeGateway) -> None:
    @table.get(
        "/event", "event.subscribe", "OpenCode's V1 events, flat (SSE)", answer=SSE,
        query=("directory",),
    )  # fmt: skip
    async def v1_events() -> Response:
        return sse_response(app, gw, _v1_producer(gw, envelope=False))

    @table.get(
        "/global/event", "global.event", "OpenCode's V1 events in the global envelope (SSE)",
        answer=SSE,
    )  # fmt: skip
    async def v1_global_events() -> Response:
        return sse_response(app, gw, _v1_producer(gw, envelope=True))


def v1_lookup(gw: OpenCodeGateway) -> Lookup:
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


def _v1_notice(notice: Notice) -> dict[str, Any]:
    """A Location's notice as OpenCode's V1 event: ``plugin.error``, which OpenCode does not
    have, as the ``session.error`` without a session that its TUI shows as a toast; the
    others (``mcp.tools.changed``) as they are."""
    properties = notice.properties
    if notice.type != "plugin.error":
        return {"type": notice.type, "properties": properties}
    message = f"plugin {properties['name']} failed in {properties['hook']}: {properties['error']}"
    error = {"name": "UnknownError", "data": {"message": message}}
    return {"type": "session.error", "properties": {"error": error}}


async def _cut_short(gw: OpenCodeGateway) -> list[dict[str, Any]]:
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


def _v1_producer(gw: OpenCodeGateway, *, envelope: bool) -> Producer:
    """A V1 stream: ``server.connected`` first, then ``session.status`` idle for each session
    a crash cut short (``_cut_short``), then, for each hub item, OpenCode's V2 events it
    makes (``gateway.opencode._v1_next``) followed by its V1 projection, a ``server.heartbeat`` every
    ``gw.heartbeat`` seconds. An item of a session deleted meanwhile is dropped."""
    rt = gw.rt
    ids = IdGenerator()
    home = str(gw.directory.resolve())
    only = project_filter(current_grant())
    places: dict[str, tuple[str, str | None]] = {}

    async def place_of(sid: str) -> tuple[str, str | None]:
        if sid not in places:
            try:
                info = await rt.sessions.get(sid)
                places[sid] = (info.location.directory, info.project_id)
            except SessionNotFoundError:
                places[sid] = (home, None)
        return places[sid]

    async def located(props: dict[str, Any], where: str | None) -> tuple[str, str | None]:
        """The directory and project a payload is of (None: a deleted session's)."""
        info, sid = props.get("info"), props.get("sessionID")
        if where is not None:
            try:
                return where, await rt.projects.id_of(where)
            except InvalidSessionInputError:  # the directory went away
                return where, None
        if isinstance(info, dict) and "directory" in info:
            return info["directory"], info.get("projectID")
        if isinstance(sid, str):
            return await place_of(sid)
        return home, only or await rt.projects.id_of(home)  # the server's own

    async def frame(payload: dict[str, Any], where: str | None = None) -> bytes | None:
        """The payload's frame, or None when the request's grant does not see it."""
        payload = {"id": ids.new("evt"), **payload}
        directory, project = await located(payload["properties"], where)
        if only is not None and project != only:
            return None
        if not envelope:
            return sse_frame(encode(payload))
        if project is None:
            project = await rt.projects.id_of(home)
        return sse_frame(encode({"directory": directory, "project": project, "payload": payload}))

    async def emit(
        send: trio.MemorySendChannel[bytes], payload: dict[str, Any], where: str | None = None
    ) -> None:
        found = await frame(payload, where)
        if found is not None:
            await send.send(found)

    async def produce(send: trio.MemorySendChannel[bytes]) -> None:
        since = int(time.time() * 1000)
        lookup = v1_lookup(gw)
        projection = V1Projection(lookup, gw.live, gw.board.busy, since=since)
        nexts = NextEvents(lookup, delivery_lookup(rt))
        with rt.hub.subscribe(None) as sub:
            gw.board.add(sub)
            try:
                await emit(send, {"type": "server.connected", "properties": {}})
                for payload in await _cut_short(gw):
                    await emit(send, payload)
                beat = trio.current_time() + gw.heartbeat
                while True:
                    with trio.move_on_at(beat):
                        item = await sub.receive()
                        if item == OVERFLOWED:
                            projection.reset()
                            nexts.reset()
                            continue
                        if isinstance(item, Notice):  # a Location's (mcp.tools.changed)
                            await emit(send, _v1_notice(item), item.directory)
                            continue
                        try:
                            payloads = []
                            if isinstance(item, StoredEvent | LiveDelta):
                                payloads = await nexts.feed(item)
                            payloads += await projection.feed(cast(Any, item))
                        except SessionNotFoundError:
                            payloads = []
                        for payload in payloads:
                            await emit(send, payload)
                        if isinstance(item, Idle):
                            gw.board.delivered(item.session_id, sub)
                        continue
                    beat = trio.current_time() + gw.heartbeat
                    await emit(send, {"type": "server.heartbeat", "properties": {}})
            finally:
                gw.board.remove(sub)

    return produce
