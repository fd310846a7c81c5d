"""What the generated clients stand on: the HTTP transports, the answer envelopes, error
answers raised as exceptions, and the session event stream that resumes by seq."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from types import TracebackType
from typing import Any, Final, Generic, Self, TypeVar
from urllib.parse import quote

import anyio
import httpx
import msgspec

from kittiwake_sdk._errors import error_from

__all__ = [
    "DEFAULT_RECONNECTS",
    "DEFAULT_RETRY_DELAY",
    "DEFAULT_TIMEOUT",
    "AsyncBase",
    "Cursor",
    "Data",
    "Durable",
    "DurableEvent",
    "DurableEvents",
    "Page",
    "SyncBase",
]

T = TypeVar("T")
DEFAULT_TIMEOUT: Final = 30.0
"""Seconds an ordinary request may take (connect, each read, each write)."""
DEFAULT_RECONNECTS: Final = 10
"""Reconnections an event stream tries in a row before it raises."""
DEFAULT_RETRY_DELAY: Final = 0.2
"""Seconds an event stream waits before reconnecting after a dropped connection."""
_USER: Final = "kittiwake"


class Data(msgspec.Struct, Generic[T], frozen=True):
    """The ``{"data": ...}`` envelope."""

    data: T


class Cursor(msgspec.Struct, frozen=True):
    previous: str | None = None
    next: str | None = None


class Page(msgspec.Struct, Generic[T], frozen=True):
    """One page of a listing; ``cursor.next`` asks for the following one."""

    data: list[T]
    cursor: Cursor


class Durable(msgspec.Struct, frozen=True, rename={"aggregate_id": "aggregateID"}):
    aggregate_id: str
    seq: int
    version: int


class DurableEvent(msgspec.Struct, frozen=True):
    """One event of a session's log (OpenCode's ``SessionDurableEvent``)."""

    id: str
    type: str
    durable: Durable
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None

    @property
    def seq(self) -> int:
        return self.durable.seq


@functools.cache
def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind)


def _q(part: str) -> str:
    """A path parameter, percent-encoded."""
    return quote(part, safe="")


def _given(**values: Any) -> dict[str, Any]:
    """The keyword arguments that were given (not None)."""
    return {k: v for k, v in values.items() if v is not None}


def _params(query: Mapping[str, str | int | None] | None) -> dict[str, str]:
    return {k: str(v) for k, v in (query or {}).items() if v is not None}


def _content(body: msgspec.Struct | None) -> dict[str, Any]:
    if body is None:
        return {}
    return {"content": msgspec.json.encode(body), "headers": {"content-type": "application/json"}}


def _raise_for(response: httpx.Response) -> None:
    if response.status_code >= 400:
        try:
            body = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            body = response.text
        raise error_from(response.status_code, body)


class SyncBase:
    """A synchronous connection to a Kittiwake server at *base_url* (``http://host:port``),
    with basic auth when *password* is given. Use as a context manager, or ``close`` it."""

    def __init__(
        self, base_url: str, *, password: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT, http: httpx.Client | None = None,
    ) -> None:  # fmt: skip
        auth = (_USER, password) if password else None
        self.http = http or httpx.Client(base_url=base_url, auth=auth, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self, method: str, path: str, *, body: msgspec.Struct | None = None,
        query: Mapping[str, str | int | None] | None = None,
    ) -> bytes:  # fmt: skip
        """The answer's body; raises the ``KittiwakeError`` of an error answer and httpx's
        ``TransportError`` when the server cannot be reached."""
        response = self.http.request(method, path, params=_params(query), **_content(body))
        _raise_for(response)
        return response.content


class AsyncBase:
    """An asynchronous connection (httpx: under trio or asyncio) to a Kittiwake server at
    *base_url*, with basic auth when *password* is given. Use as an async context manager,
    or ``aclose`` it. *reconnects* and *retry_delay* bound an event stream's resumption."""

    def __init__(
        self, base_url: str, *, password: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT, reconnects: int = DEFAULT_RECONNECTS,
        retry_delay: float = DEFAULT_RETRY_DELAY, http: httpx.AsyncClient | None = None,
    ) -> None:  # fmt: skip
        auth = (_USER, password) if password else None
        self.http = http or httpx.AsyncClient(base_url=base_url, auth=auth, timeout=timeout)
        self.reconnects = reconnects
        self.retry_delay = retry_delay

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(
        self, method: str, path: str, *, body: msgspec.Struct | None = None,
        query: Mapping[str, str | int | None] | None = None,
    ) -> bytes:  # fmt: skip
        """The answer's body; raises the ``KittiwakeError`` of an error answer and httpx's
        ``TransportError`` when the server cannot be reached. Cancellation abandons the
        request (the server may have acted on it)."""
        response = await self.http.request(method, path, params=_params(query), **_content(body))
        _raise_for(response)
        return response.content

    def _durable_events(self, path: str, after: int | None) -> DurableEvents:
        return DurableEvents(self, path, after)


class DurableEvents:
    """A session's durable events from seq ``after + 1`` on, as an async iterator.

    Reads ``GET /api/session/{id}/event`` (SSE). When the connection drops, or the server
    ends the stream (a restart), it reconnects with ``after`` set to the last seq it
    yielded, so the seqs it yields run on with no gap and no duplicate. It raises httpx's
    ``TransportError`` after ``reconnects`` failed reconnections in a row, and the
    ``KittiwakeError`` of an error answer (an unknown session) at once. ``last_seq`` is
    the seq of the last event yielded. Iterate it once; leaving the loop (``break``, an
    error, cancellation) closes the connection.
    """

    def __init__(self, client: AsyncBase, path: str, after: int | None) -> None:
        self._client, self._path = client, path
        self.last_seq = after

    def __aiter__(self) -> AsyncIterator[DurableEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[DurableEvent]:
        failures = 0
        while True:
            try:
                async with aclosing(self._connected()) as events:
                    async for event in events:
                        failures = 0
                        yield event
            except httpx.TransportError:
                failures += 1
                if failures > self._client.reconnects:
                    raise
                await anyio.sleep(self._client.retry_delay)

    async def _connected(self) -> AsyncGenerator[DurableEvent, None]:
        """The events of one connection, until the server ends it."""
        after = self.last_seq
        params = {} if after is None else {"after": str(after)}
        timeout = httpx.Timeout(self._client.http.timeout.connect, read=None)
        http = self._client.http
        async with http.stream("GET", self._path, params=params, timeout=timeout) as response:
            if response.status_code >= 400:
                await response.aread()
                _raise_for(response)
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    event = _decoder(DurableEvent).decode("\n".join(data))
                    data = []
                    if self.last_seq is not None and event.seq <= self.last_seq:
                        continue
                    self.last_seq = event.seq
                    yield event
