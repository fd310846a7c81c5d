"""A real HTTP/1.1 server on 127.0.0.1 (trio + h11) answering from a route table."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import h11
import trio


@dataclass
class Page:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunked: bool = False  # no Content-Length: the body is streamed in chunks


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


Route = Callable[[Seen], Page]


class WebServer:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        self.port = 0

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def page(self, path: str, page: Page) -> None:
        self.routes[path] = lambda _: page

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                seen = await _read(conn, stream)
                if seen is None:
                    return
                self.seen.append(seen)
                route = self.routes.get(seen.target.split("?", 1)[0])
                page = route(seen) if route else Page(status=404, body=b"missing")
                await _send(conn, stream, page)
                if conn.our_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            return


async def _read(conn: h11.Connection, stream: trio.SocketStream) -> Seen | None:
    head: h11.Request | None = None
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
            body += event.data
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            headers = {k.decode().lower(): v.decode() for k, v in head.headers}
            return Seen(head.method.decode(), head.target.decode(), headers, bytes(body))
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send(conn: h11.Connection, stream: trio.SocketStream, page: Page) -> None:
    headers = [("content-type", page.content_type), *page.headers]
    if page.chunked:
        headers.append(("transfer-encoding", "chunked"))
    else:
        headers.append(("content-length", str(len(page.body))))
    await stream.send_all(conn.send(h11.Response(status_code=page.status, headers=headers)))
    step = 65536 if page.chunked else max(len(page.body), 1)
    for start in range(0, len(page.body), step):
        await stream.send_all(conn.send(h11.Data(data=page.body[start : start + step])))
    await stream.send_all(conn.send(h11.EndOfMessage()))


@asynccontextmanager
async def web_server() -> AsyncIterator[WebServer]:
    server = WebServer()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        server.port = listeners[0].socket.getsockname()[1]
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
