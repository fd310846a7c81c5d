"""The connection layer under the gateway: keep-alive, ordering, slow readers, shutdown.

Everything runs a real server on 127.0.0.1 (Hypercorn's ``serve`` with the gateway's
own app, or the gateway's ``serve`` itself) and talks to it over sockets with h11 as the client.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from socket import SO_ERROR, SOL_SOCKET
from typing import Any

import h11
import httpx
import pytest
import trio
import trio.testing
from hypercorn.trio import serve as hypercorn_serve

from gateway import Server, create_app, serve
from gateway.http._app import DEFAULT_MAX_BODY
from gateway.http._serve import asgi_app, server_config
from runtime import open_runtime
from runtime.llm import ScriptedLLM

from .conftest import answer

HEALTH = {"healthy": True}


@asynccontextmanager
async def serving(app: Any, **config: float) -> AsyncIterator[tuple[str, int]]:
    """Serve the ASGI *app* with Hypercorn's ``serve`` and the gateway's ``server_config``;
    *config* overrides Hypercorn settings."""
    cfg = server_config("127.0.0.1", 0, graceful_timeout=2.0, max_body=DEFAULT_MAX_BODY)
    for name, value in config.items():
        setattr(cfg, name, value)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            partial(hypercorn_serve, app, cfg, shutdown_trigger=stop.wait, mode="asgi")
        )
        host, port = binds[0].removeprefix("http://").split(":")
        try:
            yield host, int(port)
        finally:
            stop.set()


@asynccontextmanager
async def gateway_served(tmp_path: Path, **config: float) -> AsyncIterator[tuple[str, int]]:
    """The gateway on a fresh runtime, via ``serving``."""
    async with open_runtime(data_dir=tmp_path / "data") as rt:
        app = create_app(rt, directory=tmp_path)
        async with serving(asgi_app(app), **config) as address:
            yield address


@asynccontextmanager
async def connected(host: str, port: int, *, rcvbuf: int | None = None) -> AsyncIterator[Client]:
    """A ``Client`` on a new connection (a small *rcvbuf* makes a slow reader)."""
    sock = trio.socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        await sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    async with trio.SocketStream(sock) as stream:
        yield Client(stream)


class Client:
    """An HTTP/1.1 client on one socket, parsing with h11."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)

    def request(self, target: str, method: str = "GET") -> bytes:
        """The bytes of one request without a body (kept in step with h11's state)."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        headers = [("host", "kittiwake"), ("content-length", "0")]
        return self.h11.send(h11.Request(method=method, target=target, headers=headers)) + (
            self.h11.send(h11.EndOfMessage()) or b""
        )

    async def response(self) -> tuple[int, bytes]:
        """Read one whole response: status and body."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        status, body = 0, bytearray()
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, bytes(body)
            else:
                raise AssertionError(f"unexpected {event!r}")

    async def get(self, target: str) -> tuple[int, Any]:
        await self.stream.send_all(self.request(target))
        status, body = await self.response()
        return status, json.loads(body)

    async def wait_closed(self) -> float:
        """Read until the server closes the connection; return when that was."""
        try:
            while await self.stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass  # reset rather than closed: gone all the same
        return trio.current_time()


async def test_a_burst_of_connections_waits_in_the_listen_backlog(tmp_path):
    """300 clients connecting while the server cannot accept (its event loop is busy
    here) are all connected by the kernel, held in the listen backlog."""
    async with gateway_served(tmp_path) as (host, port):
        clients = [socket.socket() for _ in range(300)]
        try:
            for client in clients:  # no checkpoint: the server accepts none meanwhile
                client.setblocking(False)
                client.connect_ex((host, port))
            pending, deadline = set(clients), time.monotonic() + 2.0
            while pending and time.monotonic() < deadline:
                _, writable, _ = select.select([], list(pending), [], 0.05)
                pending -= {c for c in writable if not c.getsockopt(SOL_SOCKET, SO_ERROR)}
            assert not pending, f"{len(pending)} of 300 connections were not completed"
        finally:
            for client in clients:
                client.close()


async def test_keep_alive_timeout_closes_only_idle_connections(tmp_path):
    async with gateway_served(tmp_path, keep_alive_timeout=0.3) as (host, port):
        async with connected(host, port) as client, connected(host, port) as other:
            for _ in range(5):  # 0.75 s of requests 0.15 s apart: never idle for 0.3 s
                await trio.sleep(0.15)
                assert await client.get("/api/health") == (200, HEALTH)
            idle_since = trio.current_time()
            with trio.fail_after(5):
                closed_at = await client.wait_closed()
            assert 0.25 <= closed_at - idle_since < 2
            with trio.fail_after(5):  # the other connection idled out at the same pace
                assert await other.wait_closed() - idle_since < 2


async def test_pipelined_requests_are_answered_in_order(tmp_path):
    async with gateway_served(tmp_path) as (host, port):
        async with connected(host, port) as client:
            targets = ["/api/health", "/api/session/ses_nope", "/path/nowhere"] * 10
            raw = b"".join(f"GET {t} HTTP/1.1\r\nhost: k\r\n\r\n".encode() for t in targets)
            await client.stream.send_all(raw)  # all at once, in one write
            statuses = []
            for target in targets:
                client.request(target)  # keeps h11 in step; the bytes were sent above
                statuses.append((await client.response())[0])
            assert statuses == [200, 404, 404] * 10


async def test_a_slow_reader_gets_a_large_response_whole(tmp_path):
    text = "0123456789abcdef\n" * 200_000  # 3.4 MB of JSON-escaped content
    (tmp_path / "big.txt").write_text(text)
    async with gateway_served(tmp_path, keep_alive_timeout=0.2) as (host, port):
        async with connected(host, port, rcvbuf=4096) as slow:
            await slow.stream.send_all(slow.request("/file/content?path=big.txt"))
            await trio.sleep(1.0)  # not reading, for five keep-alive timeouts
            async with connected(host, port) as other:
                with trio.fail_after(5):  # the stalled write holds no one else up
                    assert await other.get("/api/health") == (200, HEALTH)
            with trio.fail_after(20):
                status, body = await slow.response()
        assert status == 200
        assert json.loads(body) == {"type": "text", "content": text}


async def lifespan(receive: Any, send: Any) -> None:
    """Answer Hypercorn's lifespan startup and shutdown (an app must, or serving fails)."""
    for phase in ("startup", "shutdown"):
        await receive()
        await send({"type": f"lifespan.{phase}.complete"})


async def test_a_slow_reader_gets_the_tail_queued_after_the_last_write(tmp_path):
    head, tail = b"h" * 300_000, b"t" * 60_000

    async def two_chunks(scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        headers = [(b"content-length", str(len(head) + len(tail)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": head, "more_body": True})
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    async with serving(two_chunks, keep_alive_timeout=0.2) as (host, port):
        async with connected(host, port, rcvbuf=4096) as client:
            await client.stream.send_all(client.request("/"))
            # ~160 KB/s: the tail waits in the connection's queue well past the keep-alive
            # timeout after the response (as far as the protocol knows) is complete
            received = bytearray()
            with trio.fail_after(30):
                while chunk := await client.stream.receive_some(4096):
                    received += chunk
                    if received.endswith(tail):
                        break
                    await trio.sleep(0.025)
            assert received.endswith(head + tail)


async def test_a_streaming_response_waits_for_its_reader(tmp_path, autojump_clock):
    accepted = 0
    finished = trio.Event()

    async def stream_forever(scope, receive, send):
        nonlocal accepted
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        async with trio.open_nursery() as nursery:

            async def until_disconnected():
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(until_disconnected)
            chunk = b"x" * 16384
            while True:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                accepted += len(chunk)
        finished.set()

    async with serving(stream_forever, keep_alive_timeout=0.2) as (host, port):
        async with connected(host, port, rcvbuf=4096) as client:
            await client.stream.send_all(client.request("/"))
            with trio.fail_after(5):  # an app that is never held never lets this return
                await trio.testing.wait_all_tasks_blocked()
            stalled = accepted
            await trio.sleep(1)  # five keep-alive timeouts, on the autojump clock
            await trio.testing.wait_all_tasks_blocked()
            # the app is held at what the sockets buffer plus the connection's queue
            assert accepted == stalled
            assert 0 < stalled < 32 * 1024 * 1024
            with trio.fail_after(5):  # reading lets it go on
                while accepted == stalled:
                    await client.stream.receive_some(65536)
        with trio.fail_after(5):  # a client that leaves releases the app
            await finished.wait()


async def test_stop_closes_idle_connections_and_finishes_busy_requests(tmp_path):
    llm = ScriptedLLM(lambda request: answer("slow answer"), latency=0.5)
    async with open_runtime(data_dir=tmp_path / "data", llm=llm) as rt:
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(
                partial(serve, rt, "127.0.0.1", 0, graceful_timeout=30.0)
            )
            async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
                sid = (await http.post("/api/session", json={})).json()["data"]["id"]
                await http.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}})
                host, port = server.url.removeprefix("http://").split(":")
                waited: list[int] = []

                async def wait_for_answer() -> None:
                    waited.append((await http.post(f"/api/session/{sid}/wait")).status_code)

                async with connected(host, int(port)) as idle, trio.open_nursery() as inner:
                    assert await idle.get("/api/health") == (200, HEALTH)
                    inner.start_soon(wait_for_answer)
                    await trio.testing.wait_all_tasks_blocked()  # the server holds the wait
                    stopped_at = trio.current_time()
                    server.stop()
                    with trio.fail_after(5):  # idle: closed at once, not after 30 s
                        await idle.wait_closed()
            assert waited == [204]  # the busy request was answered
        assert trio.current_time() - stopped_at < 15


async def test_cancelling_serve_drops_busy_connections_at_once(tmp_path):
    llm = ScriptedLLM(lambda request: answer("never seen"), latency=60)
    async with open_runtime(data_dir=tmp_path / "data", llm=llm) as rt, AsyncExitStack() as stack:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                server: Server = await nursery.start(
                    partial(serve, rt, "127.0.0.1", 0, graceful_timeout=30.0)
                )
                async with httpx.AsyncClient(base_url=server.url) as http:
                    sid = (await http.post("/api/session", json={})).json()["data"]["id"]
                    await http.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "x"}})
                host, port = server.url.removeprefix("http://").split(":")
                client = await stack.enter_async_context(connected(host, int(port)))
                await client.stream.send_all(client.request(f"/api/session/{sid}/wait", "POST"))
                await trio.testing.wait_all_tasks_blocked()  # the server holds the wait
                cancelled_at = trio.current_time()
                scope.cancel()
        assert trio.current_time() - cancelled_at < 10  # not after the 30 s grace
        with trio.fail_after(10):
            await client.wait_closed()


async def test_a_port_in_use_raises_oserror_before_started(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with open_runtime(data_dir=tmp_path / "data") as rt:
            async with trio.open_nursery() as nursery:
                with pytest.raises(OSError):
                    await nursery.start(partial(serve, rt, "127.0.0.1", port))
