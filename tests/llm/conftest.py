"""A real HTTP/1.1 server on 127.0.0.1 (trio + h11) that replays scripted responses."""

from __future__ import annotations

import functools
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import h11
import pytest
import trio

SAMPLE = Path("/work/shared/fixtures/models-dev-sample.json")


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = "text/event-stream"
    hang: bool = False  # after the chunks, hold the response open until the client leaves
    json_body: object = None
    delay: float = 0.0  # seconds before each chunk after the first


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class LocalServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.disconnects = 0
        self.disconnected = trio.Event()
        self.port = 0
        self.responder: Callable[[Recorded], Reply] | None = None
        """When set, answers each request instead of the queue."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read(conn, stream)
                if request is None:
                    return
                self.requests.append(request)
                reply = self.reply_for(request)
                await self._respond(conn, stream, reply)
                if reply.hang:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            self._left()

    def reply_for(self, request: Recorded) -> Reply:
        """The reply to *request*: the responder's when set, else the next queued one (a
        subclass may compute it)."""
        if self.responder is not None:
            return self.responder(request)
        return self.replies.popleft() if self.replies else Reply(status=599, chunks=[b"none"])

    def _left(self) -> None:
        self.disconnects += 1
        self.disconnected.set()

    async def _read(self, conn: h11.Connection, stream: trio.SocketStream) -> Recorded | None:
        head = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                if not data and head is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body.extend(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                headers = {k.decode().lower(): v.decode() for k, v in head.headers}
                return Recorded(head.method.decode(), head.target.decode(), headers, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _respond(self, conn: h11.Connection, stream: trio.SocketStream, reply: Reply) -> None:
        chunks = reply.chunks
        ctype = reply.content_type
        if reply.json_body is not None:
            chunks = [json.dumps(reply.json_body).encode()]
            ctype = "application/json"
        headers = [("content-type", ctype), ("transfer-encoding", "chunked"), *reply.headers]
        await stream.send_all(conn.send(h11.Response(status_code=reply.status, headers=headers)))
        for n, chunk in enumerate(chunks):
            if n and reply.delay:
                await trio.sleep(reply.delay)
            await stream.send_all(conn.send(h11.Data(data=chunk)))
        if reply.hang:
            while await stream.receive_some(65536):
                pass
            self._left()
            return
        await stream.send_all(conn.send(h11.EndOfMessage()))


@pytest.fixture
async def server(nursery: trio.Nursery) -> LocalServer:
    srv = LocalServer()
    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, srv.handle, 0, host="127.0.0.1")
    )
    srv.port = listeners[0].socket.getsockname()[1]
    return srv


@pytest.fixture
def models_dev() -> dict:
    return json.loads(SAMPLE.read_text())


@pytest.fixture
async def http():
    import httpx

    async with httpx.AsyncClient() as client:
        yield client
