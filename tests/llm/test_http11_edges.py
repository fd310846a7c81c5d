"""HTTP11Transport on protocol edge cases, side by side with httpx's default transport.

Each case is a raw server on 127.0.0.1 writing bytes; the same request goes through
``provider_http_client()`` (``HTTP11Transport``) and through ``httpx.AsyncClient()``
(httpcore), and both must end the same way: the same httpx exception class, or the same
response. TLS is checked the same way with ``trustme`` certificates.
"""

from __future__ import annotations

import functools
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing
import trustme

from runtime.llm import HTTP11Transport, provider_http_client

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@dataclass
class RawServer:
    """Answers every request with *answer*, records what arrived, then closes (or, when
    *linger*, waits for the client to leave first)."""

    answer: bytes
    linger: bool = False
    received: list[bytes] = field(default_factory=list)
    url: str = ""

    async def serve(self, stream: trio.abc.Stream) -> None:
        data = b""
        try:
            while not _request_complete(data):
                more = await stream.receive_some(65536)
                if not more:
                    break
                data += more
            self.received.append(data)
            await stream.send_all(self.answer)
            while self.linger and await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)


def _request_complete(data: bytes) -> bool:
    head, found, body = data.partition(b"\r\n\r\n")
    if not found:
        return False
    if b"transfer-encoding: chunked" in head.lower():
        return body.endswith(b"0\r\n\r\n")
    _, has_length, rest = head.lower().partition(b"\r\ncontent-length:")
    return len(body) >= (int(rest.split(b"\r\n", 1)[0]) if has_length else 0)


@asynccontextmanager
async def serving(
    answer: bytes, tls: ssl.SSLContext | None = None, *, linger: bool = False
) -> AsyncIterator[RawServer]:
    server = RawServer(answer, linger=linger)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/"
    served: list[trio.abc.Listener[trio.abc.Stream]] = list(listeners)
    if tls is not None:
        served = [trio.SSLListener(listener, tls) for listener in listeners]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, server.serve, served)
        yield server
        nursery.cancel_scope.cancel()


Outcome = tuple[object, ...]


async def _get(client: httpx.AsyncClient, url: str, **kwargs: object) -> Outcome:
    response = await client.request("GET", url, **kwargs)  # type: ignore[arg-type]
    headers = sorted((k, v) for k, v in response.headers.items() if k.startswith("x-"))
    return ("response", response.status_code, headers, response.content)


async def _outcome(
    make: Callable[[], httpx.AsyncClient], answer: bytes, *, linger: bool = False, **kwargs: object
) -> Outcome:
    async with serving(answer, linger=linger) as server, make() as client:
        with trio.fail_after(10):
            try:
                result = await _get(client, server.url, **kwargs)
            except httpx.HTTPError as exc:
                result = ("error", type(exc))
        return (*result, server.received)


def ours() -> httpx.AsyncClient:
    return provider_http_client(timeout=5.0)


def default() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=5.0)


_OK = b"content-length: 2\r\n\r\nok"
# name: (raw answer, whether the server keeps the connection open after it, outcome)
EDGES: dict[str, tuple[bytes, bool, Outcome]] = {
    "NUL in a header value": (
        b"HTTP/1.1 200 OK\r\nx-a: a\x00b\r\n" + _OK,
        False,
        ("error", httpx.RemoteProtocolError),
    ),
    "30-hex-digit chunk size": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"1" * 30
        + b"\r\nabc\r\n0\r\n\r\n",
        True,  # a parser that took the size would wait for more data
        ("error", httpx.RemoteProtocolError),
    ),
    "5,000-digit content-length": (
        b"HTTP/1.1 200 OK\r\ncontent-length: " + b"9" * 5000 + b"\r\n\r\nok",
        False,
        ("error", httpx.RemoteProtocolError),
    ),
    "obs-fold is unfolded": (
        b"HTTP/1.1 200 OK\r\nx-a: one\r\n two\r\n" + _OK,
        False,
        ("response", 200, [("x-a", "one two")], b"ok"),
    ),
    "bare LF response head": (
        b"HTTP/1.1 200 OK\nx-b: 1\ncontent-length: 2\n\nok",
        False,
        ("response", 200, [("x-b", "1")], b"ok"),
    ),
    "101 without an Upgrade request": (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n",
        False,
        ("error", httpx.RemoteProtocolError),
    ),
    "103 before the answer": (
        b"HTTP/1.1 103 Early Hints\r\nx-hint: 1\r\n\r\nHTTP/1.1 200 OK\r\nx-c: 2\r\n" + _OK,
        False,
        ("response", 200, [("x-c", "2")], b"ok"),
    ),
    "body cut short": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
        False,
        ("error", httpx.RemoteProtocolError),
    ),
    "chunked body without its last chunk": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n",
        False,
        ("error", httpx.RemoteProtocolError),
    ),
}


@pytest.mark.parametrize("case", list(EDGES), ids=list(EDGES))
async def test_edge_case_ends_as_with_httpx_default_transport(case: str) -> None:
    answer, linger, expected = EDGES[case]
    for make in (ours, default):
        *outcome, _received = await _outcome(make, answer, linger=linger)
        assert tuple(outcome) == expected, make.__name__


async def test_header_injection_is_refused_before_anything_is_sent() -> None:
    injected = {"x-a": "a\r\nx-injected: 1"}
    for make in (ours, default):
        *outcome, received = await _outcome(make, b"HTTP/1.1 200 OK\r\n" + _OK, headers=injected)
        assert tuple(outcome) == ("error", httpx.LocalProtocolError), make.__name__
        assert not any(b"x-injected" in r for r in received), make.__name__


async def test_an_async_generator_body_is_chunk_encoded() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b""
        yield b"defg"

    for make in (ours, default):
        async with serving(b"HTTP/1.1 200 OK\r\n" + _OK) as server, make() as client:
            response = await client.post(server.url, content=body())
            assert response.status_code == 200
            head, _, wire = server.received[0].partition(b"\r\n\r\n")
            assert b"\r\ntransfer-encoding: chunked" in head.lower(), make.__name__
            assert b"content-length" not in head.lower()
            assert wire == b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n", make.__name__


async def test_a_101_answering_an_upgrade_hands_over_the_connection() -> None:
    answer = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\nraw"
    upgrade = {"upgrade": "x", "connection": "upgrade"}
    for make in (ours, default):
        async with serving(answer, linger=True) as server, make() as client:
            async with client.stream("GET", server.url, headers=upgrade) as response:
                assert response.status_code == 101, make.__name__
                network = response.extensions["network_stream"]
                assert await network.read(64) == b"raw", make.__name__
                await network.write(b"ping")
                await network.aclose()


# -- TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _server_tls(ca: trustme.CA, client_ca: trustme.CA | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    if client_ca is not None:  # mutual TLS: the client must show a certificate of client_ca
        client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def _tls_outcome(client: httpx.AsyncClient, server_tls: ssl.SSLContext) -> object:
    async with serving(b"HTTP/1.1 200 OK\r\n" + _OK, tls=server_tls) as server, client:
        with trio.fail_after(10):
            try:
                return (await client.get(server.url)).text
            except httpx.HTTPError as exc:
                return type(exc)


async def test_verify_trusts_a_custom_ca_and_refuses_an_unknown_one(ca: trustme.CA) -> None:
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    for verify, expected in ((trusting, "ok"), (True, httpx.ConnectError), (False, "ok")):
        assert await _tls_outcome(provider_http_client(verify=verify), _server_tls(ca)) == expected
        assert await _tls_outcome(httpx.AsyncClient(verify=verify), _server_tls(ca)) == expected


async def test_a_client_certificate_from_cert_or_the_context(
    ca: trustme.CA, tmp_path: Path
) -> None:
    client_ca = trustme.CA()
    client_cert = client_ca.issue_cert("client@example.org")
    pem = tmp_path / "client.pem"
    client_cert.private_key_and_cert_chain_pem.write_to_path(str(pem))
    with_cert = ssl.create_default_context()
    ca.configure_trust(with_cert)
    client_cert.configure_cert(with_cert)
    server_tls = _server_tls(ca, client_ca)
    assert await _tls_outcome(provider_http_client(verify=with_cert), server_tls) == "ok"
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    with pytest.deprecated_call():  # httpx 0.28 deprecates cert= in favour of the context
        client = provider_http_client(verify=trusting, cert=str(pem))
    assert await _tls_outcome(client, server_tls) == "ok"
    no_cert = ssl.create_default_context()
    ca.configure_trust(no_cert)
    refused = await _tls_outcome(provider_http_client(verify=no_cert), server_tls)
    assert refused == await _tls_outcome(httpx.AsyncClient(verify=no_cert), server_tls)
    assert refused in (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)


def test_a_bad_verify_path_fails_at_construction() -> None:
    with pytest.raises(OSError), pytest.deprecated_call():
        HTTP11Transport(verify="/nonexistent/ca.pem")


# -- socket failures and timeouts


async def test_a_reset_mid_body_is_a_read_error_as_with_httpx() -> None:
    async def reset(stream: trio.SocketStream) -> None:
        while b"\r\n\r\n" not in await stream.receive_some(65536):
            pass
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npart")
        await trio.testing.wait_all_tasks_blocked()  # the client is waiting for the rest
        # SO_LINGER 0: close with a reset instead of an orderly end of stream
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        stream.socket.close()

    outcomes = []
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, reset, 0, host="127.0.0.1")
        )
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/"
        for make in (ours, default):
            async with make() as client:
                with pytest.raises(httpx.TransportError) as caught:
                    await client.get(url)
                outcomes.append(type(caught.value))
        nursery.cancel_scope.cancel()
    assert outcomes == [httpx.ReadError, httpx.ReadError]


async def test_silence_and_a_refused_port_fail_as_with_httpx() -> None:
    async with serving(b"", linger=True) as server:  # reads the request, never answers
        for make in (ours, default):
            async with make() as client:
                with pytest.raises(httpx.ReadTimeout):
                    await client.get(server.url, timeout=httpx.Timeout(5.0, read=0.2))
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for make in (ours, default):
        async with make() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")
