"""The loopback HTTP listener the browser is sent back to after signing in to a remote MCP
server (``http://127.0.0.1:19876/mcp/oauth/callback`` unless the server's ``oauth`` says
otherwise). h11 reads each request; one request per connection, then it is closed."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from typing import Final

import h11
import trio

__all__ = ["CallbackHandler", "page", "serve_callbacks"]

CallbackHandler = Callable[[str], Awaitable[tuple[int, str]]]
"""Answers a request's target (path and query) with a status and an HTML page."""
_MAX_REQUEST: Final = 16384
_REQUEST_TIMEOUT: Final = 10.0


def page(title: str, message: str) -> str:
    """A small HTML page telling the person in the browser what happened."""
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>Kittiwake</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p></body></html>"
    )


async def serve_callbacks(
    port: int,
    handle: CallbackHandler,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on 127.0.0.1:*port* until cancelled, answering each GET with *handle*.

    Raises ``OSError`` before ``task_status.started`` when the port cannot be bound (taken
    by another program, or another Kittiwake's sign-in). A connection that sends no
    complete request within 10 s, or more than 16 KiB of it, is answered 400 or closed.
    """
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    task_status.started()

    async def connection(stream: trio.SocketStream) -> None:
        await _connection(stream, handle)

    await trio.serve_listeners(connection, listeners)


async def _connection(stream: trio.abc.Stream, handle: CallbackHandler) -> None:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST)
    async with stream:
        status, body = 400, page("Bad request", "The request could not be read.")
        with trio.move_on_after(_REQUEST_TIMEOUT):
            target = await _read_target(stream, connection)
            if target is None:
                return
            method, path = target
            if method == "GET":
                status, body = await handle(path)
            elif method:
                status, body = 405, page("Method not allowed", "Only GET is answered here.")
        data = body.encode()
        try:
            response = h11.Response(
                status_code=status, reason=b"",
                headers=[("content-type", "text/html; charset=utf-8"),
                         ("content-length", str(len(data))), ("connection", "close")],
            )  # fmt: skip
            await stream.send_all(connection.send(response) + connection.send(h11.Data(data=data)))
            await stream.send_all(connection.send(h11.EndOfMessage()))
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
            pass  # the browser went away, or the request could not be read at all


async def _read_target(
    stream: trio.abc.Stream, connection: h11.Connection
) -> tuple[str, str] | None:
    """The method and target of the request (``("", "")`` when it is not HTTP), or None
    when the peer sent nothing."""
    request: h11.Request | None = None
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            return ("", "") if request is None else None
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive_some(_MAX_REQUEST)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data and request is None:
                return None
            connection.receive_data(bytes(data))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.EndOfMessage) and request is not None:
            return request.method.decode(), request.target.decode("ascii", "replace")
        elif isinstance(event, h11.ConnectionClosed):
            return None
