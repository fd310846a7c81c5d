"""Many sessions' durable events over one ``/api/ws`` connection (trio, trio-websocket).

The gateway replays each subscription from ``after`` and follows it live (docs/websocket.md);
the watcher remembers the last seq of each session and, when the connection closes (the
server's 1013 for a client too slow to keep up, a restart, a dropped connection),
connects again and subscribes each session from its last seq: no gap, no duplicate.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection, wrap_client_stream

from kittiwake_sdk._base import DEFAULT_RECONNECTS, DEFAULT_RETRY_DELAY, DurableEvent
from kittiwake_sdk._errors import error_from

__all__ = ["DEFAULT_BUFFER", "DEFAULT_MAX_MESSAGE", "WatchedEvent", "Watcher"]

_DROPPED: Final = (OSError, HandshakeError, ConnectionClosed, trio.BrokenResourceError)
"""What ends a connection that the watcher resumes with another."""
_CLOSE_TIMEOUT: Final = 2.0
_RECEIVE_BYTES: Final = 65536
"""Bytes read at once: a large event (a long answer's text) arrives in few reads, so the
watcher catching up keeps pace with the server's stall timeout."""
DEFAULT_MAX_MESSAGE: Final = 64 * 1024 * 1024
"""The largest frame accepted: an event carries a whole text or tool output."""

DEFAULT_BUFFER: Final = 256
"""Events received and not yet taken: when full, the watcher stops reading, the server's
queue for the connection fills, and the server closes it (1013); the watcher resumes."""


class WatchedEvent(msgspec.Struct, frozen=True):
    """One durable event of a watched session."""

    session_id: str
    event: DurableEvent


class _Frame(msgspec.Struct, frozen=True, rename={"session_id": "sessionID"}):
    type: str
    session_id: str | None = None
    seq: int | None = None
    event: Any = None
    error: Any = None


class Watcher:
    """The sessions to follow over one websocket to the server at *base_url*
    (``http://host:port``) and the last seq seen of each.

    ``open`` connects; the events of every session arrive on the channel it yields, each
    once, in seq order per session. A refused subscription (an unknown session) closes the
    channel, and ``open`` raises its ``KittiwakeError`` when its block ends; so does the
    last failure after *reconnects* failed connections in a row (``OSError``,
    trio-websocket's ``HandshakeError``). Backpressure: the channel holds *buffer* events; when the consumer
    falls behind the watcher stops reading, the server closes the connection (1013) and
    the watcher resumes from each session's last seq. *authorization* is the
    ``Authorization`` header to send (a team server's ``Bearer`` token); else *password*
    is sent as basic auth. The kernel's receive buffer holds
    what the watcher has not read yet: *socket_buffer* bounds it (``SO_RCVBUF``, bytes);
    ``None`` leaves it to the system, which may let it grow to tens of megabytes on a
    loopback connection before the server sees any backpressure.
    """

    def __init__(
        self, base_url: str, sessions: Iterable[str] = (), *, password: str | None = None,
        authorization: str | None = None,
        reconnects: int = DEFAULT_RECONNECTS, retry_delay: float = DEFAULT_RETRY_DELAY,
        buffer: int = DEFAULT_BUFFER, max_message: int = DEFAULT_MAX_MESSAGE,
        socket_buffer: int | None = None,
    ) -> None:  # fmt: skip
        split = urlsplit(base_url)
        if split.scheme != "http" or split.hostname is None or split.port is None:
            raise ValueError(f"not an http://host:port URL: {base_url}")
        self.host, self.port = split.hostname, split.port
        self.last_seq: dict[str, int | None] = dict.fromkeys(sessions)
        self.connections = 0
        """Connections opened so far (a resumption adds one)."""
        self._headers: list[tuple[bytes, bytes]] = []
        if authorization:
            self._headers.append((b"Authorization", authorization.encode()))
        elif password:
            token = base64.b64encode(f"kittiwake:{password}".encode())
            self._headers.append((b"Authorization", b"Basic " + token))
        self._reconnects, self._retry_delay, self._buffer = reconnects, retry_delay, buffer
        self._max_message = max_message
        self._socket_buffer = socket_buffer

    @asynccontextmanager
    async def open(self) -> AsyncIterator[trio.MemoryReceiveChannel[WatchedEvent]]:
        """Follow the sessions until the block ends; cancellation closes the connection.
        A failure that ends following closes the channel, and is raised when the block
        ends."""
        send, receive = trio.open_memory_channel[WatchedEvent](self._buffer)
        self._failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._run, send)
            try:
                yield receive
            finally:
                nursery.cancel_scope.cancel()
        if self._failure is not None:
            raise self._failure

    async def _run(self, send: trio.MemorySendChannel[WatchedEvent]) -> None:
        """Connect again after each dropped connection; keep the failure that ends it all
        for ``open`` to raise (trio's Cancelled, a BaseException, passes through)."""
        failures = 0
        async with send:
            while True:
                try:
                    await self._connection(send)
                    failures = 0
                    continue
                except Exception as exc:
                    failure = _leaf(exc)
                if not isinstance(failure, _DROPPED) or failures >= self._reconnects:
                    self._failure = failure
                    return
                failures += 1
                await trio.sleep(self._retry_delay)

    async def _connection(self, send: trio.MemorySendChannel[WatchedEvent]) -> None:
        """One connection until the server closes it. The TCP stream is this method's own
        (``wrap_client_stream``), so it is closed however the handshake ends."""
        stream = await trio.open_tcp_stream(self.host, self.port)
        if self._socket_buffer is not None:
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._socket_buffer)
        try:
            async with trio.open_nursery() as nursery:
                ws = await wrap_client_stream(
                    nursery, stream, f"{self.host}:{self.port}", "/api/ws",
                    extra_headers=self._headers, receive_buffer_size=_RECEIVE_BYTES,
                    max_message_size=self._max_message,
                )  # fmt: skip
                try:
                    await self._follow(ws, send)
                finally:
                    with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                        await ws.aclose()
                    nursery.cancel_scope.cancel()
        finally:
            await stream.aclose()

    async def _follow(
        self, ws: WebSocketConnection, send: trio.MemorySendChannel[WatchedEvent]
    ) -> None:
        """Subscribe every session from its last seq, then pass on events until the server
        closes the connection."""
        self.connections += 1
        for ref, (sid, after) in enumerate(self.last_seq.items()):
            frame: dict[str, Any] = {"type": "subscribe", "ref": ref, "sessionID": sid}
            if after is not None:
                frame["after"] = after
            await ws.send_message(msgspec.json.encode(frame).decode())
        while True:
            try:
                raw = await ws.get_message()
            except ConnectionClosed:
                return
            frame_in = msgspec.json.decode(raw, type=_Frame)
            if frame_in.type == "reply" and frame_in.error is not None:
                raise error_from(0, frame_in.error)
            if frame_in.type == "deleted" and frame_in.session_id is not None:
                self.last_seq.pop(frame_in.session_id, None)
            if frame_in.type != "event" or frame_in.session_id is None:
                continue
            sid, seq = frame_in.session_id, frame_in.seq or 0
            last = self.last_seq.get(sid)
            if sid not in self.last_seq or (last is not None and seq <= last):
                continue
            event = msgspec.convert(frame_in.event, DurableEvent)
            await send.send(WatchedEvent(session_id=sid, event=event))
            self.last_seq[sid] = seq


def _leaf(exc: Exception) -> Exception:
    """The one failure in *exc* (a nursery's group of them): the first that is not a
    dropped connection, else the first."""
    leaves: list[Exception] = []
    pending: list[Exception] = [exc]
    while pending:
        item = pending.pop(0)
        if isinstance(item, ExceptionGroup):
            pending[:0] = list(item.exceptions)
        else:
            leaves.append(item)
    return next((e for e in leaves if not isinstance(e, _DROPPED)), leaves[0])
