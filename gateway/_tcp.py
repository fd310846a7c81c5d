"""Hypercorn's protocols served over plain TCP with less plumbing per request.

Each connection has one reader (the connection's own task, feeding Hypercorn's
``ProtocolWrapper``), one writer task that alone writes to the socket, and one idle watcher.
Request tasks only queue bytes for the writer, so a response's head and body leave in one
``send_all`` and a cancelled request task can never cut a write in half. The keep-alive
clock is a deadline the idle watcher sleeps to, moved (not restarted) per request. The
HTTP/1.1, h2c and websocket protocol classes, ``Config``, lifespan, shutdown trigger and
graceful timeout are Hypercorn's, used as ``hypercorn.trio.run.worker_serve`` uses them.

A websocket that Hypercorn fails on its own (a message over
``config.websocket_max_message_size`` is answered with close code 1009) is closed at the TCP
level right after its close frame: Hypercorn stops looking at the client's frames once the
message overflows, so the client's answering close frame can stay unread and the connection
would otherwise stay open until the client gives up.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from random import randint
from typing import Final

import trio
from hypercorn.config import Config
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.ws_stream import ASGIWebsocketState, WSStream
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.statsd import StatsdLogger
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import (
    AppWrapper,
    ASGIReceiveEvent,
    ASGISendEvent,
    ConnectionState,
    LifespanState,
    Scope,
)
from hypercorn.utils import ShutdownError, parse_socket_addr, raise_shutdown, repr_socket_addr
from wsproto import ConnectionState as WebsocketState

__all__ = ["HIGH_WATER", "LINGER", "bind", "serve_app"]

MAX_RECV: Final = 2**16
HIGH_WATER: Final = 2**16
"""Bytes a connection queues for its writer before a request task's write waits."""
LINGER: Final = 2.0
"""Seconds a failed websocket's connection keeps reading (and discarding) what the client
still sends after the server's close frame and FIN, so that closing the socket with unread
input does not reset the connection before the client has read the close frame."""


def bind(host: str, port: int, *, backlog: int) -> socket.socket:
    """A listening TCP socket on *host*:*port* (port 0 picks a free one), as Hypercorn
    binds: ``TCP_NODELAY`` and ``SO_REUSEADDR`` set, non-blocking.

    Raises:
      OSError: the address cannot be bound, e.g. the port is in use; nothing is left open.
    """
    host = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_app(
    app: AppWrapper,
    config: Config,
    sockets: Sequence[socket.socket],
    *,
    shutdown_trigger: trio.Event,
    linger: float = LINGER,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* over HTTP on *sockets* (from ``bind``) until *shutdown_trigger* is set.

    *linger* bounds how long a websocket Hypercorn failed (1009) is read and discarded
    after the server's FIN before its socket is closed (``LINGER``).

    Runs the app's lifespan startup, reports the bound URLs to ``task_status``, accepts
    connections, and on the trigger stops accepting, closes idle connections, lets busy ones
    finish for up to ``config.graceful_timeout`` seconds (then cancels them), and runs the
    lifespan shutdown. Cancellation stops everything at once; the listening sockets are
    closed either way. A failing lifespan or an app error escaping a connection propagates.
    """
    config.set_statsd_logger_class(StatsdLogger)
    lifespan_state: LifespanState = {}
    lifespan = Lifespan(app, config, lifespan_state)
    context = WorkerContext(_max_requests(config))
    listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in sockets]
    try:
        async with trio.open_nursery() as lifespan_nursery:
            await lifespan_nursery.start(lifespan.handle_lifespan)
            await lifespan.wait_for_startup()
            binds = await _announce(config, listeners)
            state = ConnectionState(lifespan_state.copy())

            async def handler(stream: trio.SocketStream) -> None:
                await _Connection(app, config, context, state, stream, linger=linger).run()

            async with trio.open_nursery() as server_nursery:
                task_status.started(binds)
                try:
                    await _accept(handler, listeners, server_nursery, shutdown_trigger, context)
                finally:
                    _close_listeners(listeners)
                    await context.terminated.set()
                    deadline = trio.current_time() + config.graceful_timeout
                    server_nursery.cancel_scope.deadline = deadline
            await lifespan.wait_for_shutdown()
            lifespan_nursery.cancel_scope.cancel()
    finally:
        _close_listeners(listeners)


def _max_requests(config: Config) -> int | None:
    """Requests this server answers before shutting down (``None``: no limit), as Hypercorn."""
    if config.max_requests is None:
        return None
    return config.max_requests + randint(0, config.max_requests_jitter)


async def _announce(config: Config, listeners: list[trio.SocketListener]) -> list[str]:
    """Log and return the URL of every listener."""
    binds = []
    for listener in listeners:
        sock = listener.socket
        bind = f"http://{repr_socket_addr(sock.family, sock.getsockname())}"
        binds.append(bind)
        await config.log.info(f"Running on {bind} (CTRL + C to quit)")
    return binds


async def _accept(
    handler: Callable[[trio.SocketStream], Awaitable[None]],
    listeners: list[trio.SocketListener],
    handler_nursery: trio.Nursery,
    shutdown_trigger: trio.Event,
    context: WorkerContext,
) -> None:
    """Accept connections into *handler_nursery* until the trigger or ``max_requests``."""
    try:
        async with trio.open_nursery(strict_exception_groups=True) as nursery:
            nursery.start_soon(raise_shutdown, shutdown_trigger.wait)
            nursery.start_soon(raise_shutdown, context.terminate.wait)
            nursery.start_soon(
                partial(trio.serve_listeners, handler, listeners, handler_nursery=handler_nursery)
            )
    except BaseExceptionGroup as error:
        _, other_errors = error.split((ShutdownError, KeyboardInterrupt))
        if other_errors is not None:
            raise other_errors from None


class _TaskGroup(TaskGroup):
    """Hypercorn's task group, whose request queues do not yield while they have room."""

    async def spawn_app(
        self,
        app: AppWrapper,
        config: Config,
        scope: Scope,
        send: Callable[[ASGISendEvent | None], Awaitable[None]],
    ) -> Callable[[ASGIReceiveEvent], Awaitable[None]]:
        """Start the app on one request; return what feeds it request events.

        The feed holds ``config.max_app_queue_size`` events and waits only when full.
        """
        sender, receiver = trio.open_memory_channel[ASGIReceiveEvent](config.max_app_queue_size)
        self.spawn(_run_app, app, config, scope, receiver.receive, send)
        return partial(_feed, sender)


async def _feed(sender: trio.MemorySendChannel[ASGIReceiveEvent], event: ASGIReceiveEvent) -> None:
    """Queue *event* for the app; block only while its queue is full."""
    try:
        sender.send_nowait(event)
    except trio.WouldBlock:
        await sender.send(event)


async def _run_app(
    app: AppWrapper,
    config: Config,
    scope: Scope,
    receive: Callable[[], Awaitable[ASGIReceiveEvent]],
    send: Callable[[ASGISendEvent | None], Awaitable[None]],
) -> None:
    """Run the app on one request, as Hypercorn does: an app error is logged, not raised,
    and ``send(None)`` always tells the protocol the app is done (it answers 500 if the
    app never started a response). Cancellation propagates."""
    try:
        await app(scope, receive, send, trio.to_thread.run_sync, trio.from_thread.run)
    except trio.Cancelled:
        raise
    except BaseExceptionGroup as error:
        cancelled, failed = error.split(trio.Cancelled)
        if failed is None:
            raise
        await config.log.exception("Error in ASGI Framework")
        if cancelled is not None:
            raise cancelled from None  # the errors are logged; the cancellation goes on
    except Exception:
        await config.log.exception("Error in ASGI Framework")
    finally:
        await send(None)


def _close_listeners(listeners: list[trio.SocketListener]) -> None:
    for listener in listeners:
        listener.socket.close()


class _Connection:
    """One accepted TCP connection: reader, writer task and idle watcher (see module doc)."""

    def __init__(
        self,
        app: AppWrapper,
        config: Config,
        context: WorkerContext,
        state: ConnectionState,
        stream: trio.SocketStream,
        *,
        linger: float = LINGER,
    ) -> None:
        self.app = app
        self.config = config
        self.context = context
        self.state = state
        self.stream = stream
        self.protocol: ProtocolWrapper
        self._buffer = bytearray()
        self._pending = 0  # bytes queued or being sent
        self._open = True  # False once the socket is closed or broken: writes are dropped
        self._wake_writer = trio.lowlevel.ParkingLot()
        self._drained = trio.lowlevel.ParkingLot()
        self._idle = True
        self._idle_deadline = math.inf
        self._idle_scope: trio.CancelScope | None = None
        self._became_idle = trio.lowlevel.ParkingLot()
        self._linger = linger
        self._failed_websocket = False

    async def run(self) -> None:
        """Serve the connection until the peer leaves, the protocol closes it or it idles out.

        Waits for the connection's request tasks. Cancellation (the server's graceful
        timeout ran out) abandons them; the socket is closed either way.
        """
        try:
            sock = self.stream.socket
            client = parse_socket_addr(sock.family, sock.getpeername())
            server = parse_socket_addr(sock.family, sock.getsockname())
            self._idle_deadline = trio.current_time() + self.config.keep_alive_timeout
            async with trio.open_nursery() as helpers:
                helpers.start_soon(self._write_loop)
                helpers.start_soon(self._watch_idle)
                async with _TaskGroup() as task_group:
                    self.protocol = ProtocolWrapper(
                        self.app, self.config, self.context, task_group,
                        ConnectionState(self.state), False, client, server,
                        self._protocol_send, "http/1.1",
                    )  # fmt: skip
                    await self.protocol.initiate()
                    await self._read_data()
                await self._drain()
                helpers.cancel_scope.cancel()
        except OSError:
            pass  # the peer left before or while we looked at the socket
        finally:
            await self._close()

    async def _protocol_send(self, event: Event) -> None:
        """Carry out one event of the protocol: queue bytes, close, or note idleness.

        Queuing bytes returns at once unless ``HIGH_WATER`` bytes are already waiting, so
        a response's writes coalesce; then it waits for the writer to catch up.
        """
        if isinstance(event, RawData):
            await self._queue(event.data)
        elif isinstance(event, Closed):
            await self._drain()
            await self._close()
            await self.protocol.handle(Closed())
        elif isinstance(event, Updated):
            self._note_idle(event.idle)

    async def _queue(self, data: bytes) -> None:
        if not self._open:
            await trio.lowlevel.checkpoint()  # dropped, as a write to a closed socket fails
            return
        if not data:
            return
        self._buffer += data
        self._pending += len(data)
        self._wake_writer.unpark()
        while self._pending > HIGH_WATER and self._open:
            await self._drained.park()

    async def _drain(self) -> None:
        """Wait until every queued byte is written, or the socket is closed or broken."""
        while self._pending and self._open:
            await self._drained.park()

    async def _write_loop(self) -> None:
        """Write what was queued, in order, all that has accumulated in one ``send_all``.

        A broken or closed socket ends the loop: queued bytes are dropped, waiting writers
        released and the protocol told the connection is closed.
        """
        try:
            while True:
                while not self._buffer:
                    await self._wake_writer.park()
                data, self._buffer = self._buffer, bytearray()
                await self.stream.send_all(data)
                self._pending -= len(data)
                self._drained.unpark_all()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._stop_writing()
            await self.protocol.handle(Closed())

    def _stop_writing(self) -> None:
        self._open = False
        self._buffer = bytearray()
        self._pending = 0
        self._drained.unpark_all()

    async def _read_data(self) -> None:
        timeout = self.config.read_timeout
        while True:
            try:
                if timeout is None:
                    data = await self.stream.receive_some(MAX_RECV)
                else:
                    with trio.fail_after(timeout):
                        data = await self.stream.receive_some(MAX_RECV)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                break
            await self.protocol.handle(RawData(bytes(data)))
            if not data:
                break
            if self._websocket_failed():
                self._failed_websocket = True  # the app hears of it as a lost connection
                break
        await self.protocol.handle(Closed())

    def _websocket_failed(self) -> bool:
        """Whether Hypercorn closed this connection's websocket on its own (1009): it sent
        its close frame while the app still holds the websocket open."""
        protocol = self.protocol.protocol
        stream = protocol.stream if isinstance(protocol, H11Protocol) else None
        return (
            isinstance(stream, WSStream)
            and stream.state is ASGIWebsocketState.CONNECTED
            and stream.connection.state is WebsocketState.LOCAL_CLOSING
        )

    def _note_idle(self, idle: bool) -> None:
        """Start or stop the keep-alive clock; never blocks."""
        self._idle = idle
        if idle:
            self._idle_deadline = trio.current_time() + self.config.keep_alive_timeout
            if self._idle_scope is not None:
                self._idle_scope.deadline = self._idle_deadline
            self._became_idle.unpark()

    async def _watch_idle(self) -> None:
        """Close the connection once it has idled ``keep_alive_timeout`` seconds with
        nothing left to write, or at once when it is idle after the server began shutting
        down. One task for the connection's life; requests only move its deadline."""
        terminated = self.context.terminated
        while True:
            if not self._idle:
                await self._became_idle.park()
            elif terminated.is_set() or trio.current_time() >= self._idle_deadline:
                if not self._pending:
                    break
                await self._drain()  # a slow reader is not idle: restart the clock
                self._idle_deadline = trio.current_time() + self.config.keep_alive_timeout
            else:
                with trio.CancelScope(deadline=self._idle_deadline) as self._idle_scope:
                    await terminated.wait()
        with trio.move_on_after(self.config.graceful_timeout, shield=True):
            await self.protocol.handle(Closed())
        self._stop_writing()
        await self.stream.aclose()

    async def _close(self) -> None:
        """Half-close then close the socket; cancellation still closes it.

        After a failed websocket, what the client still sends is read and dropped until it
        closes its side or ``linger`` seconds pass, so that the close frame is not lost to
        a reset.
        """
        self._stop_writing()
        try:
            await self.stream.send_eof()
            if self._failed_websocket:
                with trio.move_on_after(self._linger):
                    while await self.stream.receive_some(MAX_RECV):
                        pass
        except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError):
            pass  # already gone, or the writer is mid-write and will see the close
        finally:
            await self.stream.aclose()
