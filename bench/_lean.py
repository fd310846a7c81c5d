"""What the gateway benchmarks share: the zero-latency OpenAI-compatible mock, a minimal
keep-alive HTTP/1.1 client, and the CPU time of processes (``bench/gateway.py``,
``bench/cluster.py``, ``bench/profile.py``)."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import msgspec
import trio

__all__ = [
    "LeanClient",
    "MAX_REQUEST",
    "MOCK_MODEL",
    "chat_answer",
    "cpu_of",
    "cpu_seconds",
    "descendants",
    "free_port",
    "mock_openai",
    "wait_healthy",
]

MOCK_MODEL = "mock-model"
MAX_REQUEST = 64 * 1024 * 1024


def chat_answer() -> bytes:
    """One chat-completions SSE answer: "ok", finish ``stop``, usage, ``[DONE]``."""
    chunks: list[dict[str, Any]] = [
        {"id": "c", "object": "chat.completion.chunk", "model": MOCK_MODEL,
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"},
                      "finish_reason": None}]},
        {"id": "c", "object": "chat.completion.chunk", "model": MOCK_MODEL,
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "c", "object": "chat.completion.chunk", "model": MOCK_MODEL, "choices": [],
         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
    ]  # fmt: skip
    body = b"".join(b"data: " + msgspec.json.encode(c) + b"\n\n" for c in chunks)
    return body + b"data: [DONE]\n\n"


async def _mock_connection(answer: bytes, stream: trio.SocketStream) -> None:
    """Answer every request on one keep-alive connection with *answer*.

    A minimal HTTP/1.1 server, so the mock costs next to nothing beside the gateway:
    request bodies need a ``content-length`` (httpx sends one), the reply's headers and
    body leave in one write. Anything else closes the connection.
    """
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
        + str(len(answer)).encode() + b"\r\n\r\n" + answer
    )  # fmt: skip
    buffer = bytearray()
    try:
        while True:
            while (end := buffer.find(b"\r\n\r\n")) < 0:
                data = await stream.receive_some(65536)
                if not data or len(buffer) > MAX_REQUEST:
                    return
                buffer += data
            head = bytes(buffer[:end]).lower()
            del buffer[: end + 4]
            if b"\r\ntransfer-encoding:" in head:
                return
            _, found, rest = head.partition(b"\r\ncontent-length:")
            length = int(rest.split(b"\r\n", 1)[0]) if found else 0
            if length > MAX_REQUEST:
                return
            while len(buffer) < length:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            del buffer[:length]
            await stream.send_all(reply)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
        return


async def mock_openai(port: int) -> None:
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    print(f"http://127.0.0.1:{port}", flush=True)
    await trio.serve_listeners(partial(_mock_connection, chat_answer()), listeners)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_healthy(url: str, deadline: float, path: str = "/api/health") -> float:
    async with httpx.AsyncClient() as client:
        while True:
            try:
                if (await client.get(url + path)).status_code < 500:
                    return time.perf_counter()
            except httpx.TransportError:
                pass
            if time.perf_counter() > deadline:
                raise TimeoutError(url)
            await trio.sleep(0.005)


class LeanClient:
    """A minimal keep-alive HTTP/1.1 client on one trio socket, the way wrk-style load
    generators are: it writes a request and reads one content-length framed answer.

    httpx costs 3-5 ms of CPU per prompt (two requests), on the same two cores as the
    server; this client costs about 0.3 ms, so the figures measure the server.
    """

    def __init__(self, stream: trio.SocketStream, host: str) -> None:
        self._stream = stream
        self._host = host.encode()
        self._buffer = bytearray()

    @classmethod
    async def open(cls, url: str) -> LeanClient:
        host, port = url.removeprefix("http://").split(":")
        return cls(await trio.open_tcp_stream(host, int(port)), f"{host}:{port}")

    async def _reconnect(self) -> None:
        """A new connection after the server said ``connection: close`` (Hypercorn does
        on a connection's 1000th request, its ``keep_alive_max_requests``)."""
        await self._stream.aclose()
        host, port = self._host.decode().split(":")
        self._stream = await trio.open_tcp_stream(host, int(port))
        self._buffer = bytearray()

    async def get(self, path: str) -> bytes:
        """GET *path*; the answer's body. Raises RuntimeError on a status >= 300."""
        return await self.post(path, method=b"GET")

    async def post(self, path: str, body: bytes = b"", *, method: bytes = b"POST") -> bytes:
        """POST *body* as JSON; the answer's body. Raises RuntimeError on a status >= 300."""
        await self._stream.send_all(
            method + b" " + path.encode() + b" HTTP/1.1\r\nhost: " + self._host
            + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body
        )  # fmt: skip
        buffer = self._buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            buffer += await self._receive()
        head = bytes(buffer[:end]).lower()
        del buffer[: end + 4]
        _, found, rest = head.partition(b"\r\ncontent-length:")
        if not found and b"transfer-encoding: chunked" in head:
            answer = await self._chunked()
        else:
            length = int(rest.split(b"\r\n", 1)[0]) if found else 0
            while len(buffer) < length:
                buffer += await self._receive()
            answer = bytes(buffer[:length])
            del buffer[:length]
        if b"\r\nconnection: close" in head:
            await self._reconnect()
        if not head.startswith(b"http/1.1 2"):
            raise RuntimeError(f"{path}: {head[:12]!r} {answer[:200]!r}")
        return answer

    async def _chunked(self) -> bytes:
        """A chunked body (OpenCode's answers to ``POST /session/{id}/message``)."""
        buffer, body = self._buffer, bytearray()
        while True:
            while (end := buffer.find(b"\r\n")) < 0:
                buffer += await self._receive()
            size = int(bytes(buffer[:end]).split(b";", 1)[0], 16)
            while len(buffer) < end + 2 + size + 2:
                buffer += await self._receive()
            body += buffer[end + 2 : end + 2 + size]
            del buffer[: end + 2 + size + 2]
            if size == 0:
                return bytes(body)

    async def _receive(self) -> bytes:
        data = await self._stream.receive_some(65536)
        if not data:
            raise RuntimeError("the server closed the connection")
        return data

    async def aclose(self) -> None:
        await self._stream.aclose()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process *pid*, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int]) -> float:
    """User plus system CPU time of the processes *pids* and their children that ended
    (OpenCode's helpers), all threads."""
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(f) for f in fields[11:15])
        total += ticks / os.sysconf("SC_CLK_TCK")
    return total


def descendants(pid: int) -> list[int]:
    """The processes under *pid* (OpenCode's runtime is a child of its launcher)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found
