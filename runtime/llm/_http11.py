"""An httpx transport speaking HTTP/1.1 over trio streams, for provider requests.

httpx's default transport (httpcore) checks every pooled connection on every request (a
``poll`` per connection) and passes each chunk through several layers; with 20 provider
streams at once that costs more CPU than the rest of a turn. ``HTTP11Transport`` keeps,
per origin, a last-in-first-out list of idle keep-alive connections, checks only the one
it takes, frames responses itself (content-length, chunked, or until close; the framing
is sans-IO: ``ChunkedDecoder`` and ``body_framing``) and streams the body as it arrives,
which is what server-sent events need.

It is only the transport: the ``httpx.AsyncClient`` in front of it still builds requests,
applies auth, follows redirects, decodes ``content-encoding`` and mounts its own proxy
transports from the environment (so proxied requests never reach this one). Failures are
raised as httpx's exceptions (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``
...), so callers classify them as they would httpcore's.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Final, Literal
from urllib.request import getproxies_environment

import httpx
import trio

__all__ = [
    "ChunkedDecoder",
    "HTTP11Transport",
    "body_framing",
    "parse_head",
    "provider_http_client",
]

DEFAULT_MAX_CONNECTIONS: Final = 100
DEFAULT_MAX_IDLE: Final = 32
DEFAULT_KEEPALIVE_EXPIRY: Final = 5.0
MAX_HEAD_BYTES: Final = 64 * 1024
_MAX_LINE: Final = 8 * 1024
_JOIN_LIMIT: Final = 64 * 1024  # bodies up to this size leave in the head's write
_RECEIVE: Final = 65536

Framing = Literal["none", "length", "chunked", "close"]


class ProtocolError(ValueError):
    """The peer's bytes are not a valid HTTP/1.1 response."""


# -- sans-IO: parsing and framing ------------------------------------------------------------


def parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """``(http_version, status, reason, headers)`` of a response head without its final
    blank line. Raises ``ProtocolError`` on anything malformed."""
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise ProtocolError(f"malformed status line {lines[0][:100]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in b" \t":
            raise ProtocolError(f"malformed header line {line[:100]!r}")
        headers.append((name, value.strip()))
    return version, int(code), reason, headers


def body_framing(
    method: bytes, status: int, headers: list[tuple[bytes, bytes]]
) -> tuple[Framing, int]:
    """How the body of a response to *method* ends (RFC 9112 §6.3): ``(framing, length)``.

    Raises ``ProtocolError`` for conflicting or malformed lengths.
    """
    if method == b"HEAD" or status < 200 or status in (204, 304):
        return "none", 0
    lengths: set[bytes] = set()
    coding: bytes | None = None
    for name, value in headers:
        lower = name.lower()
        if lower == b"transfer-encoding":
            coding = value.lower()
        elif lower == b"content-length":
            lengths.update(part.strip() for part in value.split(b","))
    if coding is not None:
        return ("chunked" if coding.rsplit(b",", 1)[-1].strip() == b"chunked" else "close"), 0
    if not lengths:
        return "close", 0
    (length,) = lengths if len(lengths) == 1 else (b"",)
    if not length.isdigit():
        raise ProtocolError(f"bad content-length {sorted(lengths)!r}")
    return ("length", int(length)) if int(length) else ("none", 0)


def _keeps_alive(version: bytes, headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"connection" and b"close" in value.lower():
            return False
    return version == b"HTTP/1.1"


class ChunkedDecoder:
    """Sans-IO decoder of a chunked body: ``feed`` bytes, get the data they complete.

    ``done`` turns true after the last chunk and its trailers; ``leftover`` holds bytes
    received past the end. Raises ``ProtocolError`` on malformed framing.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._left = -1  # bytes of chunk data still expected; -1: a size line; -2: CRLF
        self._trailers = False
        self.done = False

    @property
    def leftover(self) -> bytes:
        return bytes(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        out: list[bytes] = []
        while not self.done:
            if self._left > 0:
                take = min(self._left, len(buffer))
                if not take:
                    break
                out.append(bytes(buffer[:take]))
                del buffer[:take]
                self._left -= take
                if not self._left:
                    self._left = -2
            elif self._left == -2:
                if len(buffer) < 2:
                    break
                if buffer[:2] != b"\r\n":
                    raise ProtocolError("chunk data not followed by CRLF")
                del buffer[:2]
                self._left = -1
            else:
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > _MAX_LINE:
                        raise ProtocolError("chunk size line too long")
                    break
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                if self._trailers:
                    self.done = not line
                    continue
                size = line.split(b";", 1)[0].strip()
                if not size or size.strip(b"0123456789abcdefABCDEF"):
                    raise ProtocolError(f"bad chunk size {line[:40]!r}")
                self._left = int(size, 16)
                self._trailers = not self._left
                if self._trailers:
                    self._left = -1
        return out


# -- the I/O shell ---------------------------------------------------------------------------

_Origin = tuple[bytes, bytes, int]


class _Connection:
    __slots__ = ("buffer", "idle_since", "origin", "socket", "stream")

    def __init__(
        self, stream: trio.abc.Stream, socket: trio.socket.SocketType, origin: _Origin
    ) -> None:
        self.stream = stream
        self.socket = socket
        self.origin = origin
        self.buffer = b""
        self.idle_since = 0.0

    def close(self) -> None:
        """Close at once, without a TLS goodbye (the peer sees a reset or EOF)."""
        self.socket.close()

    async def receive(self) -> bytes:
        if buffered := self.buffer:
            self.buffer = b""
            return buffered
        data = await self.stream.receive_some(_RECEIVE)
        return data if isinstance(data, bytes) else bytes(data)


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    timeout = request.extensions.get("timeout")
    return timeout if isinstance(timeout, dict) else {}


def _deadline(seconds: float | None) -> contextlib.AbstractContextManager[object]:
    return trio.fail_after(seconds) if seconds is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _mapped(request: httpx.Request, phase: Literal["connect", "write", "read"]) -> Iterator[None]:
    """Raise the failures of *phase* as httpx's exceptions for *request*."""
    timeouts = {"connect": httpx.ConnectTimeout, "write": httpx.WriteTimeout}
    errors = {"connect": httpx.ConnectError, "write": httpx.WriteError}
    try:
        yield
    except trio.TooSlowError as exc:
        raise timeouts.get(phase, httpx.ReadTimeout)(f"{phase} timed out", request=request) from exc
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise errors.get(phase, httpx.ReadError)(
            str(exc) or type(exc).__name__, request=request
        ) from exc
    except ProtocolError as exc:
        raise httpx.RemoteProtocolError(str(exc), request=request) from exc


class HTTP11Transport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` for HTTP/1.1 over trio, with a keep-alive pool.

    Args:
        ssl_context: used for ``https`` origins; by default httpx's (certifi roots).
        max_connections: requests in flight at once; more wait up to the request's
            ``pool`` timeout, then fail with ``httpx.PoolTimeout``.
        max_idle: idle keep-alive connections kept per origin; the oldest is closed first.
        keepalive_expiry: seconds an idle connection is kept before it is closed on reuse.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_idle: int = DEFAULT_MAX_IDLE,
        keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
    ) -> None:
        self._ssl_context = ssl_context
        self._slots = trio.Semaphore(max_connections)
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send *request* and answer once the response head has arrived.

        The body streams from the returned response; closing it early (or cancelling
        while it is read) closes the connection instead of returning it to the pool.
        Failures raise httpx's exceptions; cancellation closes the connection.
        """
        if self._closed:
            raise RuntimeError("the transport is closed")
        timeouts = _timeouts(request)
        try:
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            try:
                with _deadline(timeouts.get("pool")):
                    await self._slots.acquire()
            except trio.TooSlowError as exc:
                raise httpx.PoolTimeout("no connection free", request=request) from exc
        try:
            head = _request_head(request)
            body = b"".join([chunk async for chunk in request.stream])  # type: ignore[union-attr]
            conn = await self._send(request, head, body, timeouts)
            try:
                return await self._response(request, conn, timeouts.get("read"))
            except BaseException:
                conn.close()
                raise
        except BaseException:
            self._slots.release()
            raise

    async def aclose(self) -> None:
        """Close every idle connection; requests in flight keep theirs until done."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    # -- connections

    def _take_idle(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = trio.current_time()
        while idle:
            conn = idle.pop()
            # A readable idle connection was closed by the server (or sent garbage).
            if now - conn.idle_since < self._expiry and not conn.socket.is_readable():
                return conn
            conn.close()
        return None

    def _put_idle(self, conn: _Connection) -> None:
        if self._closed:
            conn.close()
            return
        idle = self._idle.setdefault(conn.origin, [])
        conn.idle_since = trio.current_time()
        idle.append(conn)
        if len(idle) > self._max_idle:
            idle.pop(0).close()

    async def _connect(
        self, request: httpx.Request, origin: _Origin, seconds: float | None
    ) -> _Connection:
        url = request.url
        scheme, _, port = origin
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"unsupported scheme {url.scheme!r}", request=request)
        with _mapped(request, "connect"), _deadline(seconds):
            tcp = await trio.open_tcp_stream(url.host, port)
            stream: trio.abc.Stream = tcp
            try:
                tcp.setsockopt(trio.socket.IPPROTO_TCP, trio.socket.TCP_NODELAY, True)
                if scheme == b"https":
                    tls = trio.SSLStream(
                        tcp, self._tls(), server_hostname=url.host, https_compatible=True
                    )
                    await tls.do_handshake()
                    stream = tls
            except BaseException:
                tcp.socket.close()
                raise
        return _Connection(stream, tcp.socket, origin)

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return self._ssl_context

    async def _send(
        self,
        request: httpx.Request,
        head: bytes,
        body: bytes,
        timeouts: dict[str, float | None],
    ) -> _Connection:
        """A connection the request was written to: a pooled one, else a new one.

        A pooled connection that fails the write (the server closed it meanwhile) is
        replaced by a new one once; nothing of the request reached a handler then.
        """
        url = request.url
        scheme = url.raw_scheme
        origin = (scheme, url.raw_host, url.port or (443 if scheme == b"https" else 80))
        conn = self._take_idle(origin)
        while True:
            fresh = conn is None
            if conn is None:
                conn = await self._connect(request, origin, timeouts.get("connect"))
            try:
                with _mapped(request, "write"), _deadline(timeouts.get("write")):
                    if len(body) <= _JOIN_LIMIT:
                        await conn.stream.send_all(head + body)
                    else:
                        await conn.stream.send_all(head)
                        await conn.stream.send_all(body)
                return conn
            except BaseException as exc:
                conn.close()
                if fresh or not isinstance(exc, httpx.WriteError):
                    raise
                conn = None

    async def _response(
        self, request: httpx.Request, conn: _Connection, seconds: float | None
    ) -> httpx.Response:
        method = request.method.encode()
        with _mapped(request, "read"):
            while True:
                data = b""
                with _deadline(seconds):
                    while (end := data.find(b"\r\n\r\n")) < 0:
                        if len(data) > MAX_HEAD_BYTES:
                            raise ProtocolError("response head too large")
                        more = await conn.receive()
                        if not more:
                            raise ProtocolError("server closed the connection before answering")
                        data += more
                version, status, reason, headers = parse_head(data[:end])
                conn.buffer = data[end + 4 :]
                if not 100 <= status < 200 or status == 101:
                    break
            framing, length = body_framing(method, status, headers)
        reuse = _keeps_alive(version, headers) and framing != "close"
        for name, value in request.headers.raw:
            if name.lower() == b"connection" and b"close" in value.lower():
                reuse = False
        body = _ResponseBody(self, request, conn, framing, length, reuse, seconds)
        return httpx.Response(
            status,
            headers=headers,
            stream=body,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    def _finished(self, conn: _Connection, reuse: bool) -> None:
        """Give back the request's slot; pool *conn* when *reuse*, else close it."""
        self._slots.release()
        if reuse:
            self._put_idle(conn)
        else:
            conn.close()


def _request_head(request: httpx.Request) -> bytes:
    target = request.url.raw_path
    lines = [request.method.encode() + b" " + target + b" HTTP/1.1"]
    lines.extend(name + b": " + value for name, value in request.headers.raw)
    return b"\r\n".join(lines) + b"\r\n\r\n"


class _ResponseBody(httpx.AsyncByteStream):
    """The body of one response as an ``httpx.AsyncByteStream``, read as it arrives."""

    def __init__(
        self,
        pool: HTTP11Transport,
        request: httpx.Request,
        conn: _Connection,
        framing: Framing,
        length: int,
        reuse: bool,
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._request = request
        self._conn: _Connection | None = conn
        self._framing = framing
        self._length = length
        self._reuse = reuse
        self._timeout = timeout
        if framing == "none":
            self._finish(reuse and not conn.buffer)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive.

        A cut-off body raises ``httpx.RemoteProtocolError``, a read gap over the read
        timeout ``httpx.ReadTimeout``. On failure or cancellation the connection is closed.
        """
        conn = self._conn
        if conn is None:
            return
        try:
            with _mapped(self._request, "read"):
                if self._framing == "length":
                    left = self._length
                    while left:
                        data = await self._receive(conn)
                        if not data:
                            raise ProtocolError("server closed the connection mid-body")
                        if len(data) > left:
                            self._reuse = False
                            data = data[:left]
                        left -= len(data)
                        yield data
                elif self._framing == "chunked":
                    decoder = ChunkedDecoder()
                    while not decoder.done:
                        data = await self._receive(conn)
                        if not data:
                            raise ProtocolError("server closed the connection mid-body")
                        for chunk in decoder.feed(data):
                            yield chunk
                    self._reuse = self._reuse and not decoder.leftover
                else:
                    while data := await self._receive(conn):
                        yield data
        except BaseException:
            self._finish(False)
            raise
        self._finish(self._reuse)

    async def _receive(self, conn: _Connection) -> bytes:
        with _deadline(self._timeout):
            return await conn.receive()

    def _finish(self, reuse: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._finished(conn, reuse)

    async def aclose(self) -> None:
        """Stop reading: an unfinished body closes the connection. Never blocks."""
        self._finish(False)


def provider_http_client(
    *, timeout: float = 600.0, connect: float = 30.0, **options: object
) -> httpx.AsyncClient:
    """The ``httpx.AsyncClient`` for provider requests: an ``HTTP11Transport`` (*options*
    are its arguments), *timeout* seconds for reads and writes, *connect* to connect.

    When the environment names a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, any
    case), httpx's own transport is used instead: it honours those and ``NO_PROXY``, and
    httpx leaves the environment's proxies unused once a transport is given.
    """
    limits = httpx.Timeout(timeout, connect=connect)
    if _environment_proxies():
        return httpx.AsyncClient(timeout=limits)
    transport = HTTP11Transport(**options)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, timeout=limits)


def _environment_proxies() -> bool:
    return any(scheme in getproxies_environment() for scheme in ("http", "https", "all"))
