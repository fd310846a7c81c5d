"""Serve the gateway with Hypercorn's protocols (``gateway._tcp``) inside the caller's nursery."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import Any, Final

import trio
from hypercorn.config import Config
from hypercorn.utils import wrap_app

from actors import Runtime
from gateway._app import DEFAULT_MAX_BODY, create_app, gateway_of
from gateway._fast import FastPath
from gateway._tcp import bind, serve_app

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Server", "serve", "server_config"]

_log = logging.getLogger("kittiwake.gateway")
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4096


class Server:
    """A running gateway: its bound URLs and a way to stop it."""

    def __init__(self, binds: list[str], stop: trio.Event, app: Any) -> None:
        self.binds = binds
        self._stop = stop
        self.app = app

    @property
    def url(self) -> str:
        """The first bound URL, e.g. ``http://127.0.0.1:4096``."""
        return self.binds[0]

    def stop(self) -> None:
        """Close open streams and websockets, then let the server finish and return."""
        gateway_of(self.app).close_streams()
        self._stop.set()


async def serve(
    rt: Runtime, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
    password: str | None = None, cors_origins: Sequence[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY, graceful_timeout: float = 2.0,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED, **app_options: Any,
) -> None:  # fmt: skip
    """Serve *rt* over HTTP until cancelled or ``Server.stop()``; use with ``nursery.start``.

    ``gateway._tcp`` runs Hypercorn's protocols on each connection and calls ``FastPath``
    (``gateway/_fast.py``), which answers the per-prompt routes itself and passes everything
    else to the Quart app.

    ``task_status`` receives the ``Server`` once the socket is bound and the app started
    (port 0 picks a free port; ``server.url`` tells which). ``Server.stop()`` closes the
    open streams, closes idle connections and gives busy ones ``graceful_timeout`` seconds.
    Cancellation closes the open streams and stops serving at once. Failure to bind raises
    ``OSError`` before anything starts.
    """
    app = create_app(
        rt, password=password, cors_origins=cors_origins, max_body=max_body, **app_options
    )
    config = server_config(graceful_timeout=graceful_timeout, max_body=max_body)
    sock = bind(host, port, backlog=config.backlog)
    stop = trio.Event()
    fast = wrap_app(FastPath(app, gateway_of(app)), config.wsgi_max_body_size, "asgi")
    try:
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(
                partial(serve_app, fast, config, [sock], shutdown_trigger=stop)
            )
            server = Server(binds, stop, app)
            _log.info("serving", extra={"binds": binds})
            task_status.started(server)
    finally:
        gateway_of(app).close_streams()


def server_config(*, graceful_timeout: float, max_body: int) -> Config:
    """Hypercorn's ``Config`` for serving the gateway (the address is ``bind``'s)."""
    config = Config()
    config.graceful_timeout = graceful_timeout
    config.websocket_max_message_size = max_body
    config.accesslog = None
    config.errorlog = logging.getLogger("kittiwake.gateway.hypercorn")
    return config
