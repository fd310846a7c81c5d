"""Serve the gateway with Hypercorn's public trio API inside the caller's nursery.

``hypercorn.trio.serve`` runs the connections, keep-alive, lifespan, TLS and graceful
shutdown; this module builds its ``Config`` and wraps the app in two ASGI layers:
``WebsocketMessageLimit`` enforces the websocket message limit (Hypercorn's own one is set
out of reach, see the class doc) and ``ReraiseCancellation`` does the one thing Hypercorn's
request task does differently from what the gateway needs.
"""

from __future__ import annotations

import logging
import socket
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    ASGISendEvent,
    Scope,
    WebsocketReceiveEvent,
)

from gateway.http._app import gateway_of
from gateway.http._traced import Traced
from runtime.telemetry import active_processor

if TYPE_CHECKING:
    from quart_trio import QuartTrio

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LINGER",
    "ReraiseCancellation",
    "Server",
    "ShieldedLastSend",
    "WebsocketMessageLimit",
    "asgi_app",
    "bind",
    "serve_app",
    "server_config",
]

_log = logging.getLogger("kittiwake.gateway")
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4096
KEEP_ALIVE_TIMEOUT: Final = 5.0
"""Seconds an idle keep-alive connection stays open."""
LISTEN_BACKLOG: Final = 1024
"""Connections the kernel completes and holds for the server to accept (capped by
``net.core.somaxconn``): hundreds of sessions' clients connecting at once wait in it
instead of being dropped (Hypercorn's default is 100)."""
TLS_HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds a client has to finish the TLS handshake."""
MAX_REQUEST_HEAD: Final = 16 * 1024
"""Bytes of a request line and headers h11 buffers before answering 431/400."""
LINGER: Final = 2.0
"""Seconds a websocket closed for an oversized message waits for the client's answering
close frame before the app is told it is gone (and Hypercorn closes TCP)."""
MESSAGE_TOO_BIG: Final = 1009


class Server:
    """A running gateway: its bound URLs and a way to stop it."""

    def __init__(self, binds: list[str], stop: trio.Event, app: Any) -> None:
        self.binds = binds
        self._stop = stop
        self.app = app

    @property
    def url(self) -> str:
        """The first bound URL, e.g. ``http://127.0.0.1:4096`` (``https://`` with TLS)."""
        return self.binds[0]

    def stop(self) -> None:
        """Close open streams and websockets, then let the server finish and return."""
        gateway_of(self.app).close_streams()
        self._stop.set()


async def serve_app(
    app: QuartTrio, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
    graceful_timeout: float = 2.0, certfile: str | Path | None = None,
    keyfile: str | Path | None = None, listen_fd: int | None = None,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
) -> None:  # fmt: skip
    """Serve *app* (``create_core``) over HTTP until cancelled or ``Server.stop()``; use with
    ``nursery.start``. The app's ``Gateway`` observers watch the hub and its background
    tasks run while it is served.

    ``hypercorn.trio.serve`` runs the server and the Quart app answers every request.
    With *certfile* and *keyfile* (PEM) it serves HTTPS and ``wss``.

    ``task_status`` receives the ``Server`` once the socket is bound and the app started
    (port 0 picks a free port; ``server.url`` tells which). ``Server.stop()`` closes the
    open streams, closes idle connections and gives busy ones ``graceful_timeout`` seconds.
    With *listen_fd* (a listening socket's descriptor, a ``--workers`` parent's) it serves
    that socket instead of binding *host*:*port*, and closes it when it ends.
    Cancellation closes the open streams and stops serving at once. Failure to bind raises
    ``OSError`` before anything starts; an unreadable certificate or key raises
    ``OSError`` or ``ssl.SSLError`` as it is loaded, before anything is bound.
    """
    gw = gateway_of(app)
    rt, max_body = gw.rt, gw.max_body
    config = server_config(
        host, port, graceful_timeout=graceful_timeout, max_body=max_body,
        certfile=certfile, keyfile=keyfile,
    )  # fmt: skip
    config.create_ssl_context()  # a bad certificate fails here, before the lifespan starts
    # The server's own project first: a directory below it outside git belongs to it.
    rt.projects.serve_from(str(gw.directory))
    await rt.projects.register(str(gw.directory.resolve()))
    # Bound here so that a port in use raises OSError before anything starts; Hypercorn
    # takes the socket over by its descriptor (its documented ``fd://`` bind).
    fd = listen_fd if listen_fd is not None else bind(host, port).detach()
    config.bind = [f"fd://{fd}"]
    stop = trio.Event()
    asgi = asgi_app(app)
    for observer in gw.observers:
        rt.hub.add_observer(observer)
    try:
        async with trio.open_nursery() as nursery:
            for task in gw.background:
                nursery.start_soon(task, stop)
            binds: list[str] = await nursery.start(
                partial(hypercorn_serve, asgi, config, shutdown_trigger=stop.wait, mode="asgi")
            )
            server = Server(binds, stop, app)
            _log.info("serving", extra={"binds": binds})
            task_status.started(server)
    finally:
        for observer in gw.observers:
            rt.hub.remove_observer(observer)
        gw.close_streams()


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to *host*:*port* (port 0 picks a free one), as Hypercorn binds:
    ``TCP_NODELAY`` and ``SO_REUSEADDR`` set, non-blocking; not yet listening.

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
    except BaseException:
        sock.close()
        raise
    return sock


def server_config(
    host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, graceful_timeout: float,
    max_body: int, certfile: str | Path | None = None, keyfile: str | Path | None = None,
) -> Config:  # fmt: skip
    """Hypercorn's ``Config`` for serving the gateway on *host*:*port*.

    TLS is on when both *certfile* and *keyfile* are given; one without the other raises
    ``ValueError``.
    """
    if (certfile is None) != (keyfile is None):
        raise ValueError("TLS needs both a certificate file and a key file")
    config = Config()
    config.bind = [f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"]
    if certfile is not None and keyfile is not None:
        config.certfile = str(certfile)
        config.keyfile = str(keyfile)
    config.graceful_timeout = graceful_timeout
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
    config.backlog = LISTEN_BACKLOG
    config.ssl_handshake_timeout = TLS_HANDSHAKE_TIMEOUT
    config.h11_max_incomplete_size = MAX_REQUEST_HEAD
    # Never reached: past its limit Hypercorn 0.18 answers 1009 but then handles one frame
    # per read and keeps buffering, so a close frame arriving with the message's tail stays
    # unread and TCP open (docs/websocket.md). ``WebsocketMessageLimit`` applies *max_body*.
    config.websocket_max_message_size = sys.maxsize
    config.accesslog = None
    config.errorlog = logging.getLogger("kittiwake.gateway.hypercorn")
    return config


def asgi_app(app: QuartTrio) -> ASGIFramework:
    """What Hypercorn serves: *app* (``create_core``) behind the gateway's ASGI layers, each
    request a span when telemetry is on."""
    gw = gateway_of(app)
    inner: ASGIFramework = app
    if active_processor() is not None:  # each request a span (never built otherwise)
        inner = Traced(inner, gw.routes)
    return ReraiseCancellation(ShieldedLastSend(WebsocketMessageLimit(inner, gw.max_body)))


class ShieldedLastSend:
    """ASGI middleware: the last message of an HTTP answer (``http.response.body`` without
    ``more_body``) is sent shielded from cancellation.

    Sending it is where Hypercorn ends the request and re-arms the connection's keep-alive
    timer, behind a lock (a checkpoint). Quart-Trio runs each request beside a task that
    reads the client's messages and cancels both when Hypercorn says the client is done,
    which Hypercorn does during that same send: the cancellation reached the timer's lock,
    the timer was never re-armed, and the connection was never closed as idle (neither by
    the keep-alive timeout nor by ``Server.stop()``). Hypercorn already writes to the socket
    shielded; the shield adds only its bookkeeping after the write. Other messages and
    scopes pass through untouched.
    """

    def __init__(self, app: ASGIFramework) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """Run the app on one connection scope; failures and cancellation are the app's."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def shielded(message: ASGISendEvent) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        await self.app(scope, receive, shielded)


class ReraiseCancellation:
    """ASGI middleware: an app error that arrives in one exception group with a
    cancellation is logged here and the cancellation alone propagates.

    Hypercorn's request task logs a group holding any error and returns, so the
    cancellation that came with it (the server shutting down, a client gone) would end
    there; trio needs it to reach the scope that cancelled. A group of cancellations only,
    or of errors only, passes through untouched (Hypercorn logs errors itself).
    """

    def __init__(self, app: ASGIFramework) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """Run the app on one connection scope; see the class doc for failures."""
        try:
            await self.app(scope, receive, send)
        except BaseExceptionGroup as group:
            cancelled, failed = group.split(trio.Cancelled)
            if cancelled is None or failed is None:
                raise
            _log.error("Error in ASGI Framework", exc_info=failed)
            raise cancelled from None


class WebsocketMessageLimit:
    """ASGI middleware: a websocket message over *max_message* bytes (UTF-8 for text) is
    answered with close code 1009, and the app sees the client leave.

    Hypercorn hands over whole messages only, so the check runs on each one received. On
    an oversized one the layer sends ``websocket.close`` (1009), then waits up to *linger*
    seconds for the client's answering close frame (Hypercorn reads it, tells the layer
    the client disconnected and closes TCP after it), discarding any message still
    arriving, and returns ``websocket.disconnect`` (code 1009) to the app. What the app
    sends from then on is dropped; when the app returns Hypercorn closes TCP, if the client
    had not answered. HTTP and lifespan scopes pass through untouched.

    Cancellation while lingering propagates (the app's receive was cancelled).
    """

    def __init__(self, app: ASGIFramework, max_message: int, *, linger: float = LINGER) -> None:
        self.app = app
        self.max_message = max_message
        self.linger = linger

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        """Run the app on one connection scope; see the class doc."""
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        limited = _LimitedWebsocket(receive, send, self.max_message, self.linger)
        await self.app(scope, limited.receive, limited.send)


class _LimitedWebsocket:
    def __init__(
        self, receive: ASGIReceiveCallable, send: ASGISendCallable, limit: int, linger: float
    ) -> None:
        self._receive = receive
        self._send = send
        self._limit = limit
        self._linger = linger
        self._closed = False

    async def receive(self) -> ASGIReceiveEvent:
        event = await self._receive()
        if event["type"] != "websocket.receive" or self._closed or self._fits(event):
            return event
        self._closed = True
        await self._send({"type": "websocket.close", "code": MESSAGE_TOO_BIG, "reason": None})
        with trio.move_on_after(self._linger):
            while (await self._receive())["type"] != "websocket.disconnect":
                pass  # a message the client sent before it saw the close frame
        return {"type": "websocket.disconnect", "code": MESSAGE_TOO_BIG}

    def _fits(self, event: WebsocketReceiveEvent) -> bool:
        data = event.get("bytes")
        if data is not None:
            return len(data) <= self._limit
        text = event.get("text") or ""
        # A character is 1 to 4 bytes of UTF-8: encode only when the count cannot decide.
        if len(text) > self._limit:
            return False
        return len(text) * 4 <= self._limit or len(text.encode()) <= self._limit

    async def send(self, message: ASGISendEvent) -> None:
        if self._closed:  # the websocket is closed: what the app still sends goes nowhere
            await trio.lowlevel.checkpoint()
            return
        await self._send(message)
