"""The thin I/O shell: send a ``WireRequest`` with httpx and decode its SSE body."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import msgspec
import trio

from ._errors import classify_http_error, classify_transport_error
from ._events import LLMEvent, ProviderError
from ._protocols import StreamDecoder
from ._route import WireRequest
from ._sse import FrameTooLargeError, SSEDecoder

if TYPE_CHECKING:
    import httpx

__all__ = ["close_unfinished", "stream_wire"]

_CLOSE_TIMEOUT = 1.0
_CLOSE_MAX_STEPS = 4


@lru_cache(maxsize=64)
def _parsed_url(url: str) -> httpx.URL:
    """*url* parsed once: a provider's endpoint is the same on every request, and httpx
    parses a string URL in full each time (about 25 us of the request's build)."""
    import httpx

    return httpx.URL(url)


async def stream_wire(
    client: httpx.AsyncClient,
    wire: WireRequest,
    decoder: StreamDecoder,
    *,
    idle_timeout: float,
    max_frame_bytes: int,
    max_error_body_bytes: int,
    now: Callable[[], float] | None = None,
) -> AsyncIterator[LLMEvent]:
    """Stream one request's events; every failure ends the stream as a ``ProviderError``.

    HTTP errors are classified from their (bounded) body; transport errors and an
    idle gap longer than *idle_timeout* between chunks are retryable. Cancellation
    (or closing this generator) closes the response, and so the connection.
    """
    import httpx  # imported by whoever built *client*; deferred to keep start-up light

    try:
        async with client.stream(
            wire.method, _parsed_url(wire.url), headers=wire.headers, content=wire.body
        ) as response:
            if response.status_code >= 400:
                body = await _read_bounded(response, max_error_body_bytes)
                yield classify_http_error(response.status_code, body, response.headers, now=now)
                return
            sse = SSEDecoder(max_frame_bytes=max_frame_bytes)
            chunks = response.aiter_bytes()
            try:
                while True:
                    with trio.fail_after(idle_timeout):
                        chunk = await anext(chunks, None)
                    if chunk is None:
                        break
                    for frame in sse.feed(chunk):
                        for event in decoder.feed(frame):
                            yield event
            except BaseException:
                await close_unfinished(response, chunks)
                raise
            for frame in sse.close():
                for event in decoder.feed(frame):
                    yield event
            for event in decoder.finish():
                yield event
    except (httpx.TransportError, trio.TooSlowError) as exc:
        yield classify_transport_error(exc)
    except (msgspec.DecodeError, FrameTooLargeError, KeyError, TypeError) as exc:
        yield ProviderError(kind="terminal", message=f"undecodable provider stream: {exc}")


async def close_unfinished(response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
    """Close the connection, then run httpx's suspended body iterators to their end.

    Once the connection is closed their next step fails at once, so every nested
    generator finishes here instead of being finalised later by the garbage
    collector. Shielded and bounded: it runs while a cancellation unwinds.
    """
    with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
        await response.aclose()
        for _ in range(_CLOSE_MAX_STEPS):
            try:
                await anext(chunks)
            except (StopAsyncIteration, Exception):
                return


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    chunks = response.aiter_bytes()
    while (chunk := await anext(chunks, None)) is not None:
        body.extend(chunk)
        if len(body) >= limit:
            await close_unfinished(response, chunks)
            break
    return bytes(body[:limit])
