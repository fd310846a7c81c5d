"""An httpx transport speaking HTTP/1.1 over trio streams, for provider requests.

httpx's default transport (httpcore) checks every pooled connection on every request (a
``poll`` per connection) and passes each chunk through several layers; with 20 provider
streams at once that costs more CPU than the rest of a turn. ``HTTP11Transport`` keeps,
per origin, a last-in-first-out list of idle keep-alive connections and checks only the
one it takes. The framing is h11's (one ``h11.Connection`` per pooled connection), as in
httpcore: request heads are validated, bodies are framed by content-length or chunked,
responses are parsed as RFC 9112 asks, and a connection goes back to the pool only when
h11 says both sides finished their message. The body streams as it arrives, which is what
server-sent events need.

It is only the transport: the ``httpx.AsyncClient`` in front of it still builds requests,
applies auth, follows redirects, decodes ``content-encoding`` and mounts its own proxy
transports from the environment (so proxied requests never reach this one). Failures are
raised as httpx's exceptions (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``,
``LocalProtocolError`` ...), mapped as httpcore maps them, so callers classify them alike.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Final, Literal
from urllib.request import getproxies_environment

import h11
import httpx
import trio

__all__ = ["HTTP11Transport", "provider_http_client"]

DEFAULT_MAX_CONNECTIONS: Final = 100
DEFAULT_MAX_IDLE: Final = 32
DEFAULT_KEEPALIVE_EXPIRY: Final = 5.0
MAX_HEAD_BYTES: Final = 64 * 1024
_JOIN_LIMIT: Final = 64 * 1024  # fixed bodies up to this size leave in the head's write
_RECEIVE: Final = 65536

CertTypes = str | tuple[str, str] | tuple[str, str, str]
_Origin = tuple[bytes, bytes, int]
_Phase = Literal["connect", "write", "read"]


def _wire(conn: _Connection, event: h11.Request | h11.Data | h11.EndOfMessage) -> bytes:
    """The bytes h11 frames *event* into on *conn* (h11 raises ``LocalProtocolError`` for
    an event the state or the framing forbids)."""
    return conn.h11.send(event) or b""  # None only for ConnectionClosed, never sent here


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    timeout = request.extensions.get("timeout")
    return timeout if isinstance(timeout, dict) else {}


def _deadline(seconds: float | None) -> contextlib.AbstractContextManager[object]:
    return trio.fail_after(seconds) if seconds is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _mapped(request: httpx.Request, phase: _Phase) -> Iterator[None]:
    """Raise the failures of *phase* as httpx's exceptions for *request* (as httpcore's
    ``map_exceptions`` does: h11's protocol errors, socket errors and timeouts)."""
    try:
        yield
    except trio.TooSlowError as exc:
        timeout = {"connect": httpx.ConnectTimeout, "write": httpx.WriteTimeout}
        raise timeout.get(phase, httpx.ReadTimeout)(f"{phase} timed out", request=request) from exc
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        error = {"connect": httpx.ConnectError, "write": httpx.WriteError}
        raise error.get(phase, httpx.ReadError)(
            str(exc) or type(exc).__name__, request=request
        ) from exc
    except h11.RemoteProtocolError as exc:
        raise httpx.RemoteProtocolError(str(exc), request=request) from exc
    except h11.LocalProtocolError as exc:
        raise httpx.LocalProtocolError(str(exc), request=request) from exc


class _Connection:
    """One pooled connection: the trio stream, its socket and its h11 state machine."""

    __slots__ = ("h11", "idle_since", "origin", "socket", "stream")

    def __init__(
        self, stream: trio.abc.Stream, socket: trio.socket.SocketType, origin: _Origin
    ) -> None:
        self.stream = stream
        self.socket = socket
        self.origin = origin
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.idle_since = 0.0

    def close(self) -> None:
        """Close at once, without a TLS goodbye (the peer sees a reset or EOF)."""
        self.socket.close()

    async def next_event(self, seconds: float | None) -> object:
        """h11's next event, receiving at most *seconds* apart (``trio.TooSlowError``).

        Raises h11's protocol errors and the stream's errors unmapped.
        """
        while (event := self.h11.next_event()) is h11.NEED_DATA:
            await self.receive(seconds)
        return event

    async def receive(self, seconds: float | None) -> None:
        """Feed h11 the next bytes (or the end of the stream) within *seconds*."""
        with _deadline(seconds):
            data = await self.stream.receive_some(_RECEIVE)
        state = self.h11
        if not data and state.their_state is h11.SEND_RESPONSE:
            raise h11.RemoteProtocolError("server closed the connection before answering")
        state.receive_data(data if isinstance(data, bytes) else bytes(data))

    def reusable(self) -> bool:
        """Start the next cycle if both sides finished cleanly; whether that happened."""
        state = self.h11
        if state.our_state is not h11.DONE or state.their_state is not h11.DONE:
            return False
        state.start_next_cycle()
        leftover, closed = state.trailing_data
        return not leftover and not closed


class HTTP11Transport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` for HTTP/1.1 over trio, with a keep-alive pool.

    Args:
        verify, cert, trust_env: TLS options for ``https`` origins, as
            ``httpx.AsyncHTTPTransport`` takes them (``httpx.create_ssl_context``):
            ``True`` for certifi's roots (or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when
            *trust_env*), ``False`` for none, or an ``ssl.SSLContext``.
        max_connections: requests in flight at once; more wait up to the request's
            ``pool`` timeout, then fail with ``httpx.PoolTimeout``.
        max_idle: idle keep-alive connections kept per origin; the oldest is closed first.
        keepalive_expiry: seconds an idle connection is kept before it is closed on reuse.
    """

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | str | bool = True,
        cert: CertTypes | None = None,
        trust_env: bool = True,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_idle: int = DEFAULT_MAX_IDLE,
        keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
    ) -> None:
        self._ssl_context: ssl.SSLContext | None = None
        self._verify, self._cert, self._trust_env = verify, cert, trust_env
        if verify is not True or cert is not None:  # a bad path fails here, as in httpx
            self._ssl_context = httpx.create_ssl_context(verify, cert, trust_env)
        self._slots = trio.Semaphore(max_connections)
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send *request* and answer once the response head has arrived.

        The body streams from the returned response; closing it early (or cancelling
        while it is read) closes the connection instead of returning it to the pool.
        Informational answers are skipped; a ``101`` answers an ``Upgrade`` request with
        the connection in the ``network_stream`` extension and is a
        ``RemoteProtocolError`` otherwise (as in httpcore). Failures raise httpx's
        exceptions; cancellation closes the connection.
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
            with _mapped(request, "write"):
                head = h11.Request(
                    method=request.method,
                    target=request.url.raw_path,
                    headers=request.headers.raw,
                )
            conn = await self._send(request, head, timeouts)
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
        context = self._tls() if scheme == b"https" else None
        with _mapped(request, "connect"), _deadline(seconds):
            tcp = await trio.open_tcp_stream(url.host, port)
            stream: trio.abc.Stream = tcp
            try:
                tcp.setsockopt(trio.socket.IPPROTO_TCP, trio.socket.TCP_NODELAY, True)
                if context is not None:
                    tls = trio.SSLStream(
                        tcp, context, server_hostname=url.host, https_compatible=True
                    )
                    await tls.do_handshake()
                    stream = tls
            except BaseException:
                tcp.socket.close()
                raise
        return _Connection(stream, tcp.socket, origin)

    def _tls(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context(self._verify, self._cert, self._trust_env)
        return self._ssl_context

    async def _send(
        self, request: httpx.Request, head: h11.Request, timeouts: dict[str, float | None]
    ) -> _Connection:
        """A connection *request* was written to: a pooled one, else a new one.

        A pooled connection that fails the first write (the server closed it meanwhile)
        is replaced by a new one once; nothing of the body was consumed then. A write
        error after that is left for the response to explain (the server may have
        answered early, as httpcore allows).
        """
        url = request.url
        scheme = url.raw_scheme
        origin = (scheme, url.raw_host, url.port or (443 if scheme == b"https" else 80))
        fixed = isinstance(request.stream, httpx.ByteStream)
        conn = self._take_idle(origin)
        while True:
            fresh = conn is None
            if conn is None:
                conn = await self._connect(request, origin, timeouts.get("connect"))
            try:
                with _mapped(request, "write"), _deadline(timeouts.get("write")):
                    parts = [_wire(conn, head)]
                    if fixed:  # bytes, framed by content-length: one write with the head
                        async for chunk in request.stream:  # type: ignore[union-attr]
                            parts.append(_wire(conn, h11.Data(data=chunk)))
                        parts.append(_wire(conn, h11.EndOfMessage()))
                    await conn.stream.send_all(b"".join(parts))
                break
            except BaseException as exc:
                conn.close()
                if fresh or not isinstance(exc, httpx.WriteError):
                    raise
                conn = None
        if not fixed:  # a stream of chunks: sent as it comes, chunk-encoded by h11
            try:
                with _mapped(request, "write"), _deadline(timeouts.get("write")):
                    async for chunk in request.stream:  # type: ignore[union-attr]
                        if chunk:
                            await conn.stream.send_all(_wire(conn, h11.Data(data=chunk)))
                    await conn.stream.send_all(_wire(conn, h11.EndOfMessage()))
            except httpx.WriteError:
                pass  # the server may have answered already; the response says what happened
            except BaseException:
                conn.close()
                raise
        return conn

    async def _response(
        self, request: httpx.Request, conn: _Connection, seconds: float | None
    ) -> httpx.Response:
        with _mapped(request, "read"):
            while True:  # informational answers other than 101 are skipped
                event = await conn.next_event(seconds)
                if isinstance(event, h11.Response) or (
                    isinstance(event, h11.InformationalResponse) and event.status_code == 101
                ):
                    break
        extensions: dict[str, object] = {
            "http_version": b"HTTP/" + event.http_version,
            "reason_phrase": event.reason,
        }
        headers = event.headers.raw_items()
        if event.status_code == 101:
            self._slots.release()
            extensions["network_stream"] = _UpgradedStream(request, conn)
            return httpx.Response(101, headers=headers, extensions=extensions)
        body = _ResponseBody(self, request, conn, seconds)
        return httpx.Response(
            event.status_code, headers=headers, stream=body, extensions=extensions
        )

    def _finished(self, conn: _Connection, reuse: bool) -> None:
        """Give back the request's slot; pool *conn* when *reuse*, else close it."""
        self._slots.release()
        if reuse:
            self._put_idle(conn)
        else:
            conn.close()


class _ResponseBody(httpx.AsyncByteStream):
    """The body of one response as an ``httpx.AsyncByteStream``, read as it arrives."""

    def __init__(
        self,
        pool: HTTP11Transport,
        request: httpx.Request,
        conn: _Connection,
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._request = request
        self._conn: _Connection | None = conn
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive.

        A cut-off or malformed body raises ``httpx.RemoteProtocolError``, a read gap over
        the read timeout ``httpx.ReadTimeout``. On failure or cancellation the connection
        is closed; after the whole body it goes back to the pool if h11 allows reuse.
        """
        conn = self._conn
        if conn is None:
            return
        state = conn.h11
        try:
            with _mapped(self._request, "read"):
                parts: list[bytes | bytearray] = []
                while True:
                    event = state.next_event()
                    if type(event) is h11.Data:  # what arrived in one read leaves in one piece
                        parts.append(event.data)
                        continue
                    if parts:
                        yield b"".join(parts)
                        parts.clear()
                    if event is h11.NEED_DATA:
                        await conn.receive(self._timeout)
                    elif type(event) is h11.EndOfMessage:
                        break
                    else:  # h11 ends a body with EndOfMessage or raises; nothing else
                        raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")
                reuse = conn.reusable()
        except BaseException:
            self._finish(False)
            raise
        self._finish(reuse)

    def _finish(self, reuse: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._finished(conn, reuse)

    async def aclose(self) -> None:
        """Stop reading: an unfinished body closes the connection. Never blocks."""
        self._finish(False)


class _UpgradedStream:
    """The connection a ``101`` handed over, as httpcore's ``network_stream`` extension:
    ``read``, ``write``, ``aclose``, ``get_extra_info("socket")``. Bytes h11 received past the
    ``101`` head come first; timeouts are parameters, as in httpcore. Failures raise
    httpx's exceptions."""

    def __init__(self, request: httpx.Request, conn: _Connection) -> None:
        self._request = request
        self._conn = conn
        self._leftover = bytes(conn.h11.trailing_data[0])

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._leftover:
            data, self._leftover = self._leftover[:max_bytes], self._leftover[max_bytes:]
            return data
        with _mapped(self._request, "read"), _deadline(timeout):
            return bytes(await self._conn.stream.receive_some(max_bytes))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        with _mapped(self._request, "write"), _deadline(timeout):
            await self._conn.stream.send_all(buffer)

    async def aclose(self) -> None:
        self._conn.close()

    def get_extra_info(self, info: str) -> object:
        if info == "socket":
            return self._conn.socket
        return None


def provider_http_client(
    *,
    timeout: float = 600.0,
    connect: float = 30.0,
    verify: ssl.SSLContext | str | bool = True,
    cert: CertTypes | None = None,
    trust_env: bool = True,
    **options: object,
) -> httpx.AsyncClient:
    """The ``httpx.AsyncClient`` for provider requests: an ``HTTP11Transport`` (*options*
    are its pool arguments), *timeout* seconds for reads and writes, *connect* to connect,
    and the TLS options *verify*, *cert*, *trust_env* as ``httpx.AsyncClient`` takes them.

    When the environment names a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, any
    case) and *trust_env*, httpx's own transport is used instead: it honours those and
    ``NO_PROXY``, and httpx leaves the environment's proxies unused once a transport is given.
    """
    limits = httpx.Timeout(timeout, connect=connect)
    if trust_env and _environment_proxies():
        return httpx.AsyncClient(timeout=limits, verify=verify, cert=cert)
    transport = HTTP11Transport(verify=verify, cert=cert, trust_env=trust_env, **options)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, timeout=limits)


def _environment_proxies() -> bool:
    return any(scheme in getproxies_environment() for scheme in ("http", "https", "all"))
