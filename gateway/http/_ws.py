"""``/api/ws``: one websocket multiplexing session subscriptions, prompts and interrupts,
and what the client brings to a session (its tool I/O, MCP servers: ``_ws_tools``).

Protocol (``docs/websocket.md``): JSON text frames with a ``type``. Client frames carry a
``ref`` that the server echoes in its ``reply``. Every frame the server sends goes through
one bounded queue per connection; a client that leaves that queue full for longer than
``stall_timeout`` is closed with code 1013 (try again later).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio
from quart import Websocket

from gateway.http._guards import current_grant
from gateway.http._wire import (
    GatewayError,
    PermissionReplyBody,
    PromptBody,
    QuestionReplyBody,
    delta_json,
    durable_event_json,
    encode,
    error_body,
    error_for,
    follow,
    reply_permission,
)
from gateway.http._ws_tools import SocketToolIO, session_servers
from runtime import KittiwakeError, LiveDelta
from runtime.mcp import McpServers, McpServerSpec
from runtime.tools import ToolError, ToolIO

if TYPE_CHECKING:
    from gateway.http._app import Gateway

__all__ = ["SLOW_CLIENT_CODE", "WebsocketLimits", "serve_websocket"]

_log = logging.getLogger("kittiwake.gateway.ws")
SLOW_CLIENT_CODE: Final = 1013
_CLIENT_FIELDS: Final = frozenset({"type", "ref", "sessionID", "after"})
_FRAME_TYPES: Final = (
    "subscribe",
    "unsubscribe",
    "prompt",
    "interrupt",
    "resume",
    "permission.reply",
    "question.reply",
    "question.reject",
    "tools.route",
    "tools.unroute",
    "tools.io.result",
    "mcp.servers",
)


class WebsocketLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of one websocket connection.

    Attributes:
        max_pending: frames queued for the client before senders wait.
        stall_timeout: seconds the queue may stay full before the client is cut off (1013).
        close_timeout: seconds allowed to deliver the close frame before the connection drops.
        max_subscriptions: sessions one connection may subscribe to at once (and, apart,
            sessions whose tool I/O it may serve).
        tool_io_timeout: seconds a tool's file read or write waits for the client that
            serves the session's tool I/O (a command: its own timeout and this on top).
    """

    max_pending: int = 512
    stall_timeout: float = 5.0
    close_timeout: float = 5.0
    max_subscriptions: int = 64
    tool_io_timeout: float = 120.0


class _Slow(Exception):
    pass


class _Connection:
    def __init__(self, gw: Gateway, ws: Websocket, nursery: trio.Nursery) -> None:
        self._gw = gw
        self._ws = ws
        self._nursery = nursery
        self._limits = gw.ws_limits
        self._send, self._receive = trio.open_memory_channel[bytes](self._limits.max_pending)
        self._subscriptions: dict[str, trio.CancelScope] = {}
        self._routes: dict[str, trio.CancelScope] = {}
        self._servers: dict[str, trio.CancelScope] = {}
        self.tools = SocketToolIO(
            self._emit_io, self.emit_lossy, timeout=self._limits.tool_io_timeout
        )
        """The tool I/O this connection's client serves (``tools.route``)."""
        self.grant = current_grant()
        self.slow = False
        self.dropped_deltas = 0

    # -- outbound ----------------------------------------------------------------------

    async def emit(self, frame: dict[str, Any]) -> None:
        """Queue a frame, waiting at most ``stall_timeout`` for room; else cut the client off."""
        if self.slow:
            raise _Slow
        data = encode(frame)
        with trio.move_on_after(self._limits.stall_timeout):
            await self._send.send(data)
            return
        self._mark_slow()
        raise _Slow

    async def _emit_io(self, frame: dict[str, Any]) -> None:
        try:
            await self.emit(frame)
        except _Slow:
            raise ToolError("The editor's connection is too slow") from None

    def emit_lossy(self, frame: dict[str, Any]) -> None:
        """Queue a live-only frame if there is room; drop it otherwise."""
        if self.slow:
            return
        try:
            self._send.send_nowait(encode(frame))
        except trio.WouldBlock:
            self.dropped_deltas += 1

    def _mark_slow(self) -> None:
        if not self.slow:
            _log.warning("websocket client too slow; closing with 1013")
        self.slow = True
        for scope in self._subscriptions.values():
            scope.cancel()

    async def sender(self) -> None:
        """Write queued frames; after the client falls behind, close with 1013 and stop."""
        async for data in self._receive:
            if self.slow:
                break
            await self._ws.send(data.decode())
        if self.slow:
            with trio.move_on_after(self._limits.close_timeout):
                await self._ws.close(SLOW_CLIENT_CODE, "client too slow")
            self._nursery.cancel_scope.cancel()

    async def reply(self, ref: Any, *, data: Any = None, error: GatewayError | None = None) -> None:
        frame: dict[str, Any] = {"type": "reply", "ref": ref}
        if error is not None:
            frame["error"] = error_body(error)
        else:
            frame["data"] = msgspec.to_builtins(data)
        await self.emit(frame)

    # -- inbound -----------------------------------------------------------------------

    async def reader(self) -> None:
        while True:
            message = await self._ws.receive()
            raw = message.encode() if isinstance(message, str) else message
            self._nursery.start_soon(self._handle, raw)

    async def _handle(self, raw: bytes) -> None:
        ref: Any = None
        try:
            try:
                frame = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                raise GatewayError("InvalidRequestError", "Frames are JSON objects") from None
            if not isinstance(frame, dict):
                raise GatewayError("InvalidRequestError", "Frames are JSON objects")
            ref = frame.get("ref")
            data = await self._dispatch(frame)
            await self.reply(ref, data=data)
        except GatewayError as exc:
            await self._reply_error(ref, exc)
        except KittiwakeError as exc:
            await self._reply_error(ref, error_for(exc))
        except _Slow:
            return

    async def _reply_error(self, ref: Any, error: GatewayError) -> None:
        try:
            await self.reply(ref, error=error)
        except _Slow:
            return

    async def _dispatch(self, frame: dict[str, Any]) -> Any:
        kind = frame.get("type")
        session_id = frame.get("sessionID")
        if kind not in _FRAME_TYPES:
            raise GatewayError("InvalidRequestError", f"Unknown frame type {kind!r}")
        if not isinstance(session_id, str):
            raise GatewayError("InvalidRequestError", "sessionID is required")
        rt = self._gw.rt
        await self._gw.scope.check_session(self.grant, session_id)
        if kind == "subscribe":
            after = frame.get("after")
            if after is not None and (not isinstance(after, int) or isinstance(after, bool)):
                raise GatewayError("InvalidRequestError", "after must be an integer seq")
            await self._gw.check_session(session_id)
            self.subscribe(session_id, after)
            return None
        if kind == "unsubscribe":
            scope = self._subscriptions.pop(session_id, None)
            if scope is not None:
                scope.cancel()
            return None
        if self.grant is not None and not self.grant.allows("write"):
            message = f"A {self.grant.role} token cannot send {kind} frames: it needs write"
            address = self._ws.remote_addr or ""
            await self._gw.access.audit(self.grant, f"WEBSOCKET {kind}", 403, address, message)
            raise GatewayError("ForbiddenError", message)
        if kind == "permission.reply":
            request_id = frame.get("requestID")
            if not isinstance(request_id, str):
                raise GatewayError("InvalidRequestError", "requestID is required")
            try:
                answer = msgspec.convert({"reply": frame.get("reply")}, PermissionReplyBody)
            except msgspec.ValidationError as exc:
                raise GatewayError("InvalidRequestError", f"Invalid reply: {exc}") from None
            await reply_permission(rt, session_id, request_id, answer)
            return None
        if kind in ("question.reply", "question.reject"):
            return await self._question(kind, session_id, frame)
        if kind.startswith("tools."):
            return await self._tools(kind, session_id, frame)
        if kind == "mcp.servers":
            return await self._mcp(session_id, frame.get("servers"))
        await self._gw.check_session(session_id)
        if kind == "interrupt":
            await rt.sessions.interrupt(session_id)
            return None
        if kind == "resume":
            await rt.sessions.resume(session_id, wait=False, if_needed=True)
            return None
        fields = {k: v for k, v in frame.items() if k not in _CLIENT_FIELDS}
        try:
            body = msgspec.convert(fields, PromptBody)
        except msgspec.ValidationError as exc:
            raise GatewayError("InvalidRequestError", f"Invalid prompt frame: {exc}") from None
        return await rt.sessions.prompt(
            session_id, prompt=body.prompt, id=body.id, delivery=body.delivery, resume=body.resume
        )

    async def _question(self, kind: str, session_id: str, frame: dict[str, Any]) -> None:
        request_id = frame.get("requestID")
        if not isinstance(request_id, str):
            raise GatewayError("InvalidRequestError", "requestID is required")
        tools = self._gw.rt.tools
        if kind == "question.reject":
            await tools.reject_question(session_id, request_id)
            return
        try:
            body = msgspec.convert({"answers": frame.get("answers")}, QuestionReplyBody)
        except msgspec.ValidationError as exc:
            raise GatewayError("InvalidRequestError", f"Invalid answers: {exc}") from None
        await tools.reply_question(session_id, request_id, body.answers)

    # -- the session's tool I/O (docs/websocket.md, "Serving a session's tool I/O") ------

    async def _tools(self, kind: str, session_id: str, frame: dict[str, Any]) -> None:
        if kind == "tools.io.result":
            error = frame.get("error")
            if error is not None and not isinstance(error, str):
                raise GatewayError("InvalidRequestError", "error is a message")
            call_id = frame.get("callID")
            if not self.tools.settle(call_id, frame.get("result"), error):
                raise GatewayError("InvalidRequestError", f"No tool I/O call {call_id!r} waits")
            return
        old = self._routes.pop(session_id, None)
        if old is not None:
            old.cancel()
        if kind == "tools.unroute":
            return
        flags = {name: frame.get(name, False) for name in ("read", "write", "terminal")}
        if not all(isinstance(flag, bool) for flag in flags.values()):
            raise GatewayError("InvalidRequestError", "read, write and terminal are booleans")
        if len(self._routes) >= self._limits.max_subscriptions:
            raise GatewayError(
                "InvalidRequestError",
                f"At most {self._limits.max_subscriptions} routed sessions per connection",
            )
        await self._gw.check_session(session_id)
        scope = trio.CancelScope()
        self._routes[session_id] = scope
        await self._nursery.start(self._routed, session_id, self.tools.io(**flags), scope)

    async def _routed(
        self, session_id: str, io: ToolIO, scope: trio.CancelScope,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:  # fmt: skip
        try:
            with scope:
                async with self._gw.rt.tools.route_io(session_id, io):
                    task_status.started()
                    await trio.sleep_forever()
        finally:
            if self._routes.get(session_id) is scope:
                del self._routes[session_id]

    async def _mcp(self, session_id: str, servers: Any) -> dict[str, Any]:
        """Run *servers* as the session's own MCP servers for as long as this connection
        lasts (replacing those it ran for the session; none: stopped); their status map
        once each connected or failed."""
        info = await self._gw.rt.sessions.get(session_id)
        specs = session_servers(servers, info.location.directory)
        old = self._servers.pop(session_id, None)
        if old is not None:
            old.cancel()
        if not specs:
            return {}
        if len(self._servers) >= self._limits.max_subscriptions:
            raise GatewayError(
                "InvalidRequestError",
                f"At most {self._limits.max_subscriptions} sessions' servers per connection",
            )
        scope = trio.CancelScope()
        self._servers[session_id] = scope
        held: McpServers = await self._nursery.start(self._held, session_id, specs, scope)
        await held.settled()
        return held.statuses()

    async def _held(
        self, session_id: str, specs: dict[str, McpServerSpec], scope: trio.CancelScope,
        task_status: trio.TaskStatus[McpServers] = trio.TASK_STATUS_IGNORED,
    ) -> None:  # fmt: skip
        try:
            with scope:
                async with self._gw.rt.tools.mcp_servers(session_id, specs) as servers:
                    task_status.started(servers)
                    await trio.sleep_forever()
        finally:
            if self._servers.get(session_id) is scope:
                del self._servers[session_id]

    # -- subscriptions -----------------------------------------------------------------

    def subscribe(self, session_id: str, after: int | None) -> None:
        old = self._subscriptions.pop(session_id, None)
        if old is not None:
            old.cancel()
        if len(self._subscriptions) >= self._limits.max_subscriptions:
            raise GatewayError(
                "InvalidRequestError",
                f"At most {self._limits.max_subscriptions} subscriptions per connection",
            )
        scope = trio.CancelScope()
        self._subscriptions[session_id] = scope
        self._nursery.start_soon(self._follow, session_id, after, scope)

    async def _follow(self, session_id: str, after: int | None, scope: trio.CancelScope) -> None:
        rt = self._gw.rt
        try:
            with scope, rt.hub.subscribe(session_id) as deltas:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._deltas, session_id, deltas)
                    try:
                        async with follow(rt, session_id, after) as events:
                            async for item in events:
                                frame = {
                                    "type": "event", "sessionID": session_id, "seq": item.seq,
                                    "event": durable_event_json(item),
                                }  # fmt: skip
                                await self.emit(frame)
                        # The stream ends only when the session is deleted.
                        await self.emit({"type": "deleted", "sessionID": session_id})
                    except _Slow:
                        pass
                    nursery.cancel_scope.cancel()
        finally:
            if self._subscriptions.get(session_id) is scope:
                del self._subscriptions[session_id]

    async def _deltas(self, session_id: str, deltas: Any) -> None:
        while True:
            item = await deltas.receive()
            if isinstance(item, LiveDelta):
                self.emit_lossy(
                    {"type": "delta", "sessionID": session_id, "event": delta_json(item)}
                )


async def serve_websocket(gw: Gateway, ws: Websocket) -> None:
    """Run one ``/api/ws`` connection until the client leaves, falls behind, or the server stops.

    Cancellation (client gone, shutdown) ends every subscription of the connection.
    """
    await ws.accept()
    scope = trio.CancelScope()
    gw.streams.add(scope)
    gw.access.watch(scope, current_grant())
    if gw.closing:
        scope.cancel()
    try:
        with scope:
            async with trio.open_nursery() as nursery:
                connection = _Connection(gw, ws, nursery)
                try:
                    nursery.start_soon(connection.sender)
                    await connection.reader()
                finally:
                    connection.tools.close()  # the calls it serves fail at once
    finally:
        gw.streams.discard(scope)
        gw.access.streams.pop(scope, None)
