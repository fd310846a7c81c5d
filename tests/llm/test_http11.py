"""HTTP11Transport against real local servers on 127.0.0.1 (plain TCP and TLS)."""

from __future__ import annotations

import gzip
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import msgspec
import pytest
import trio
import trio.testing
import trustme

from runtime import llm as llm_package
from runtime.llm import HTTP11Transport, provider_http_client
from runtime.llm._transport import close_unfinished

Handler = Callable[[trio.abc.Stream, bytes, int], Awaitable[bool]]
_PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests talk to 127.0.0.1 through HTTP11Transport, whatever the host's proxies."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class Server:
    """A raw HTTP/1.1 server: *handler* gets each request (head and body bytes) and the
    connection's index, writes whatever it likes, and returns whether to keep reading."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.closed = 0  # connections the client ended
        self.requests: list[bytes] = []
        self.url = ""

    async def serve(self, stream: trio.abc.Stream) -> None:
        index = self.connections
        self.connections += 1
        buffer = b""
        try:
            while True:
                while (end := buffer.find(b"\r\n\r\n")) < 0:
                    data = await stream.receive_some(65536)
                    if not data:
                        self.closed += 1
                        return
                    buffer += data
                head, buffer = buffer[:end], buffer[end + 4 :]
                _, found, rest = head.lower().partition(b"\r\ncontent-length:")
                length = int(rest.split(b"\r\n", 1)[0]) if found else 0
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                body, buffer = buffer[:length], buffer[length:]
                self.requests.append(head + b"\r\n\r\n" + body)
                if not await self.handler(stream, head + b"\r\n\r\n" + body, index):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            await trio.aclose_forcefully(stream)


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(handler)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    served: list[trio.abc.Listener[trio.abc.Stream]] = list(listeners)
    if tls is not None:
        served = [trio.SSLListener(listener, tls) for listener in listeners]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, server.serve, served)
        yield server
        nursery.cancel_scope.cancel()


def answer(body: bytes, *headers: bytes, status: bytes = b"200 OK") -> bytes:
    lines = [b"HTTP/1.1 " + status, b"content-length: " + str(len(body)).encode(), *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def ok(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
    await stream.send_all(answer(b"hello"))
    return True


async def test_keep_alive_reuses_one_connection_and_sends_the_body() -> None:
    async with serving(ok) as server, provider_http_client() as client:
        for i in range(3):
            response = await client.post(server.url + "/v1/x?q=1", json={"n": i})
            assert (response.status_code, response.text) == (200, "hello")
        assert server.connections == 1
        head, _, body = server.requests[2].partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v1/x?q=1 HTTP/1.1\r\n")
        assert b"\r\ncontent-length: 7" in head.lower()
        assert msgspec.json.decode(body) == {"n": 2}


async def test_chunked_body_streams_as_it_arrives() -> None:
    release = trio.Event()

    async def chunked(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n"
        )
        await release.wait()
        await stream.send_all(b"6;ext=1\r\nsecond\r\n0\r\nx-trailer: 1\r\n\r\n")
        return True

    async with serving(chunked) as server, provider_http_client() as client:
        async with client.stream("GET", server.url) as response:
            chunks = response.aiter_bytes()
            assert await anext(chunks) == b"first"  # before the rest was even sent
            release.set()
            assert [c async for c in chunks] == [b"second"]
        assert (await client.get(server.url)).text == "firstsecond"
        assert server.connections == 1


async def test_body_until_close_and_connection_close_are_not_reused() -> None:
    async def until_close(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        if index % 2:
            await stream.send_all(answer(b"closing", b"connection: close"))
        else:
            await stream.send_all(b"HTTP/1.1 200 OK\r\n\r\nno length, ends at close")
        return False

    async with serving(until_close) as server, provider_http_client() as client:
        assert (await client.get(server.url)).text == "no length, ends at close"
        assert (await client.get(server.url)).text == "closing"
        assert (await client.get(server.url)).text == "no length, ends at close"
        assert server.connections == 3


async def test_gzip_is_decoded_and_head_has_no_body() -> None:
    async def zipped(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        if request.startswith(b"HEAD"):
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n")
        else:
            await stream.send_all(answer(gzip.compress(b"unzipped"), b"content-encoding: gzip"))
        return True

    async with serving(zipped) as server, provider_http_client() as client:
        assert (await client.head(server.url)).content == b""
        assert (await client.get(server.url)).text == "unzipped"
        assert server.connections == 1


async def test_a_connection_the_server_closed_is_replaced() -> None:
    async def once(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        await stream.send_all(answer(f"conn {index}".encode()))
        return False  # close after every answer, without saying so

    async with serving(once) as server, provider_http_client() as client:
        assert (await client.get(server.url)).text == "conn 0"
        await trio.testing.wait_all_tasks_blocked()  # the server has closed; its FIN is in
        assert (await client.get(server.url)).text == "conn 1"


async def test_idle_connections_expire(autojump_clock: trio.testing.MockClock) -> None:
    client = httpx.AsyncClient(transport=HTTP11Transport(keepalive_expiry=30))
    async with serving(ok) as server, client:
        await client.get(server.url)
        await trio.sleep(29)
        await client.get(server.url)
        assert server.connections == 1  # idle for less than the expiry: reused
        await trio.sleep(31)
        await client.get(server.url)
        assert server.connections == 2


async def test_failures_are_httpx_errors() -> None:
    async def bad(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        path = request.split(b" ", 2)[1]
        if path == b"/garbage":
            await stream.send_all(b"SPDY/9 200 OK\r\n\r\n")
        elif path == b"/cut":
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
        elif path == b"/slow":
            await trio.sleep(10)
        return False

    async with serving(bad) as server:
        client = provider_http_client(timeout=0.2)
        async with client:
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(server.url + "/garbage")
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(server.url + "/cut")
            with pytest.raises(httpx.ReadTimeout):
                await client.get(server.url + "/slow")
            with pytest.raises(httpx.RemoteProtocolError, match="before answering"):
                await client.get(server.url + "/nothing")
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with provider_http_client() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")


async def test_in_flight_limit_waits_then_times_out() -> None:
    gate = trio.Event()

    async def held(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        await gate.wait()
        await stream.send_all(answer(b"late"))
        return True

    client = httpx.AsyncClient(
        transport=HTTP11Transport(max_connections=1), timeout=httpx.Timeout(5.0, pool=0.1)
    )
    async with serving(held) as server, client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.get, server.url)
            await trio.testing.wait_all_tasks_blocked()  # it holds the one connection
            with pytest.raises(httpx.PoolTimeout):
                await client.get(server.url)
            gate.set()
        assert (await client.get(server.url)).text == "late"  # the slot came back


async def test_closing_a_body_early_or_cancelling_drops_the_connection() -> None:
    async def endless(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        if request.split(b" ", 2)[1] == b"/ok":
            await stream.send_all(answer(b"fine"))
            return True
        await stream.send_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        while True:
            await stream.send_all(b"4\r\ntick\r\n")
            await trio.sleep(0.01)

    transport = HTTP11Transport(max_connections=1)
    async with serving(endless) as server, httpx.AsyncClient(transport=transport) as client:
        # close_unfinished is how the provider stream stops early (runtime/llm/_transport.py).
        async with client.stream("GET", server.url) as response:
            chunks = response.aiter_bytes()
            await anext(chunks)
            await close_unfinished(response, chunks)
        async with client.stream("GET", server.url) as response:
            chunks = response.aiter_bytes()
            try:
                with trio.move_on_after(0.05):
                    async for _ in chunks:
                        pass
            finally:
                await close_unfinished(response, chunks)
        # Both connections were closed, and the single slot is free again.
        assert (await client.get(server.url + "/ok")).text == "fine"
        assert server.connections == 3


async def test_tls() -> None:
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    async with serving(ok, tls=server_tls) as server:
        async with provider_http_client(verify=client_tls) as client:
            assert (await client.get(server.url)).text == "hello"
            assert (await client.get(server.url)).text == "hello"
            assert server.connections == 1
        async with provider_http_client() as untrusting:  # certifi roots only
            with pytest.raises(httpx.ConnectError):
                await untrusting.get(server.url)


async def test_provider_stream_through_the_transport() -> None:
    """A chat-completions SSE answer through ProviderClient, as a provider would send it."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    sse = b"".join(b"data: " + msgspec.json.encode(c) + b"\n\n" for c in chunks)
    sse += b"data: [DONE]\n\n"

    async def chat(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        await stream.send_all(answer(sse, b"content-type: text/event-stream"))
        return True

    async with serving(chat) as server, provider_http_client() as http:
        config = {
            "provider": {
                "local": {
                    "npm": "@ai-sdk/openai-compatible",
                    "options": {"baseURL": server.url + "/v1", "apiKey": "k"},
                    "models": {"m": {"limit": {"context": 1000, "output": 100}}},
                }
            }
        }
        catalog = llm_package.Catalog.from_models_dev({}).with_config(config)
        client = llm_package.ProviderClient(catalog, llm_package.Auth(env={}), http_client=http)
        for _ in range(2):
            events = [e async for e in client.stream(_request())]
            texts = [e.delta for e in events if isinstance(e, llm_package.TextDelta)]
            assert texts == ["hi"]
            assert isinstance(events[-1], llm_package.StepFinish)
        assert server.connections == 1
        assert b"POST /v1/chat/completions HTTP/1.1" in server.requests[0]


def _request() -> llm_package.LLMRequest:
    return llm_package.LLMRequest(
        model=llm_package.ModelRef(provider_id="local", model_id="m"),
        system=[],
        messages=[llm_package.UserMessage(content=[llm_package.TextPart(text="hi")])],
    )


async def test_a_proxy_in_the_environment_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("NO_PROXY", "ALL_PROXY", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    async with serving(ok) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        async with provider_http_client() as client:
            response = await client.get("http://provider.invalid/v1/models")
        assert (response.status_code, response.text) == (200, "hello")
        # the request went to the proxy, in the absolute form a proxy is sent
        assert proxy.requests[0].startswith(b"GET http://provider.invalid/v1/models HTTP/1.1\r\n")


async def test_a_large_body_informational_answers_and_idle_bound() -> None:
    async def early_hints(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        body = request.partition(b"\r\n\r\n")[2]
        await stream.send_all(b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n")
        await stream.send_all(answer(str(len(body)).encode()))
        return True

    big = b"x" * 300_000  # past the size that leaves in the head's write
    transport = HTTP11Transport(max_idle=1)
    async with serving(early_hints) as server, httpx.AsyncClient(transport=transport) as client:
        response = await client.post(server.url, content=big)
        assert (response.status_code, response.text) == (200, "300000")
        async with trio.open_nursery() as nursery:  # two connections at once...
            for _ in range(2):
                nursery.start_soon(client.get, server.url)
        assert server.connections == 2
        await trio.testing.wait_all_tasks_blocked()  # the server saw what the client closed
        assert server.closed == 1  # ...of which only one stays idle
        await client.get(server.url)
        await client.get(server.url)
        assert server.connections == 2  # and is reused


async def test_bytes_past_the_answer_keep_the_connection_out_of_the_pool() -> None:
    async def overlong(stream: trio.abc.Stream, request: bytes, index: int) -> bool:
        await stream.send_all(answer(b"ok") + b"HTTP/1.1 200 OK\r\n")  # past the answer's end
        return True

    async with serving(overlong) as server, provider_http_client() as client:
        assert (await client.get(server.url)).text == "ok"
        assert (await client.get(server.url)).text == "ok"
        assert server.connections == 2
