"""Serve the gateway with Hypercorn's trio worker inside the caller's nursery."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from actors import Runtime
from gateway._app import DEFAULT_MAX_BODY, create_app, gateway_of
from gateway._fast import FastPath

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Server", "serve"]

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
        """Close open streams and websockets, then let Hypercorn finish and return."""
        gateway_of(self.app).close_streams()
        self._stop.set()


async def serve(
    rt: Runtime, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
    password: str | None = None, cors_origins: Sequence[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY, graceful_timeout: float = 2.0,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED, **app_options: Any,
) -> None:  # fmt: skip
    """Serve *rt* over HTTP until cancelled or ``Server.stop()``; use with ``nursery.start``.

    Hypercorn's trio worker calls ``FastPath`` (``gateway/_fast.py``), which answers the
    per-prompt routes itself and passes everything else to the Quart app.

    ``task_status`` receives the ``Server`` once the socket is bound (port 0 picks a free
    port; ``server.url`` tells which). Cancellation closes the open streams and stops
    Hypercorn. Failure to bind raises ``OSError`` before ``started``.
    """
    app = create_app(
        rt, password=password, cors_origins=cors_origins, max_body=max_body, **app_options
    )
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.graceful_timeout = graceful_timeout
    config.websocket_max_message_size = max_body
    config.accesslog = None
    config.errorlog = logging.getLogger("kittiwake.gateway.hypercorn")
    stop = trio.Event()

    async def started(binds: list[str]) -> None:
        server = Server(binds, stop, app)
        _log.info("serving", extra={"binds": binds})
        task_status.started(server)

    try:
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(
                lambda task_status: hypercorn_serve(
                    FastPath(app, gateway_of(app)),
                    config,
                    shutdown_trigger=stop.wait,
                    task_status=task_status,
                    mode="asgi",
                )  # fmt: skip
            )
            await started(binds)
    finally:
        gateway_of(app).close_streams()
