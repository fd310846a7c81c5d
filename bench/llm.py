"""LLM package benchmarks.

1. Decode throughput of each protocol adapter (SSE framing + decoder, no I/O)
   over a ~10 MB recorded-shape stream, in events per second.
2. Added latency of ``ProviderClient`` per request against a local HTTP server,
   compared with a bare ``httpx`` streaming call for the same response, over httpx's
   default transport and over ``provider_http_client()`` (``HTTP11Transport``).
3. Cost per chunk of a long chunked response body read through each transport.

Run: ``.venv/bin/python bench/llm.py`` (``--size-mb``, ``--repeats``, ``--requests``).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import h11
import httpx
import trio

from runtime.llm import (
    ADAPTERS,
    Auth,
    Catalog,
    LLMRequest,
    ModelRef,
    ProviderClient,
    Route,
    SSEDecoder,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    ToolCall,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
    UserMessage,
    provider_http_client,
    render_stream,
)

PROTOCOLS = ("openai-chat", "openai-responses", "anthropic-messages", "gemini")
CHUNK = 16 * 1024


def recorded_stream(protocol: str, size_mb: float) -> bytes:
    """A stream of text deltas with a tool call every 50 deltas, about *size_mb* MB."""
    block = [TextStart(id="t")]
    block += [TextDelta(id="t", delta=f"token {i} of the answer ") for i in range(50)]
    block += [TextEnd(id="t")]
    one = render_stream([StepStart(), *block], protocol)  # type: ignore[arg-type]
    repeats = max(1, int(size_mb * 1024 * 1024 / len(one)))
    script: list = [StepStart()]
    for n in range(repeats):
        script += [TextStart(id=f"t{n}")]
        script += [TextDelta(id=f"t{n}", delta=f"token {i} of the answer ") for i in range(50)]
        script += [TextEnd(id=f"t{n}")]
        if protocol != "gemini":
            cid = f"call_{n}"
            script += [ToolInputStart(call_id=cid, name="read")]
            script += [
                ToolInputDelta(call_id=cid, delta='{"filePath":'),
                ToolInputDelta(call_id=cid, delta='"a.txt"}'),
            ]
            script += [ToolInputEnd(call_id=cid)]
        script += [ToolCall(call_id=f"call_{n}", name="read", input={"filePath": "a.txt"})]
    script += [StepFinish(finish_reason="tool-calls", usage=Usage(input_tokens=1, output_tokens=1))]
    return render_stream(script, protocol)  # type: ignore[arg-type]


def decode_once(protocol: str, body: bytes) -> tuple[int, float]:
    route = Route(protocol=protocol, base_url="http://x", model_id="m")  # type: ignore[arg-type]
    decoder = ADAPTERS[protocol].new_decoder(route)  # type: ignore[index]
    sse = SSEDecoder(max_frame_bytes=16 * 1024 * 1024)
    count = 0
    start = time.perf_counter()
    for i in range(0, len(body), CHUNK):
        for frame in sse.feed(body[i : i + CHUNK]):
            count += len(decoder.feed(frame))
    for frame in sse.close():
        count += len(decoder.feed(frame))
    count += len(decoder.finish())
    return count, time.perf_counter() - start


def bench_decode(size_mb: float, repeats: int) -> list[tuple[str, float, int, float]]:
    rows = []
    for protocol in PROTOCOLS:
        body = recorded_stream(protocol, size_mb)
        runs = [decode_once(protocol, body) for _ in range(repeats)]
        events = runs[0][0]
        seconds = statistics.median(r[1] for r in runs)
        rows.append((protocol, len(body) / 1e6, events, events / seconds))
    return rows


HELLO = render_stream(
    [
        StepStart(),
        TextStart(id="0"),
        TextDelta(id="0", delta="hello"),
        TextEnd(id="0"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ],
    "anthropic-messages",
)


async def serve(stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.EndOfMessage):
                headers = [
                    ("content-type", "text/event-stream"),
                    ("content-length", str(len(HELLO))),
                ]
                await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)))
                await stream.send_all(conn.send(h11.Data(data=HELLO)))
                await stream.send_all(conn.send(h11.EndOfMessage()))
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return
    except (trio.BrokenResourceError, h11.ProtocolError):
        return


STREAM_CHUNKS = 2000
STREAM_CHUNK = b"data: " + b"x" * 90 + b"\n\n"


async def serve_chunks(stream: trio.SocketStream) -> None:
    """Answer every request with a chunked body of ``STREAM_CHUNKS`` chunks, in writes of
    50 chunks (as a provider's stream arrives, several events per read)."""
    conn = h11.Connection(h11.SERVER)
    batch = b"".join(b"%x\r\n" % len(STREAM_CHUNK) + STREAM_CHUNK + b"\r\n" for _ in range(50))
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.EndOfMessage):
                head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                await stream.send_all(head)
                for _ in range(STREAM_CHUNKS // 50):
                    await stream.send_all(batch)
                await stream.send_all(b"0\r\n\r\n")
                conn = h11.Connection(h11.SERVER)
            elif isinstance(event, h11.ConnectionClosed):
                return
    except (trio.BrokenResourceError, h11.ProtocolError):
        return


async def bench_chunks(make_http: Callable[[], httpx.AsyncClient], repeats: int) -> float:
    """Median seconds per chunk of a ``STREAM_CHUNKS``-chunk body through *make_http*."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve_chunks, 0, host="127.0.0.1")
        )
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/"
        runs: list[float] = []
        async with make_http() as http:
            for i in range(repeats + 3):
                t0 = time.perf_counter()
                chunks = 0
                async with http.stream("GET", url) as response:
                    async for _ in response.aiter_raw():
                        chunks += 1
                if i >= 3:  # the first runs warm the pool
                    runs.append((time.perf_counter() - t0) / STREAM_CHUNKS)
        nursery.cancel_scope.cancel()
    return statistics.median(runs)


async def bench_latency(
    requests: int, make_http: Callable[[], httpx.AsyncClient]
) -> tuple[float, float]:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        config = {"provider": {"anthropic": {"options": {"baseURL": base}}}}
        catalog = (
            Catalog.from_models_dev({})
            .with_config(
                {
                    "provider": {
                        "anthropic": {"npm": "@ai-sdk/anthropic", "env": ["K"], "models": {"m": {}}}
                    }
                }
            )
            .with_config(config)
        )
        request = LLMRequest(
            model=ModelRef(provider_id="anthropic", model_id="m"),
            system=["be brief"],
            messages=[UserMessage(content=[TextPart(text="hi")])],
        )
        async with make_http() as http:
            client = ProviderClient(catalog, Auth(env={"K": "k"}), http_client=http)
            wire = (await client.prepare(request)).wire
            bare: list[float] = []
            routed: list[float] = []
            for _ in range(20):  # warm the connection pool
                [e async for e in client.stream(request)]
            for _ in range(requests):
                t0 = time.perf_counter()
                async with http.stream(
                    "POST", wire.url, headers=wire.headers, content=wire.body
                ) as r:
                    await r.aread()
                bare.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                events = [e async for e in client.stream(request)]
                routed.append(time.perf_counter() - t0)
                assert isinstance(events[-1], StepFinish), events[-1]
        nursery.cancel_scope.cancel()
    return statistics.median(bare), statistics.median(routed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    print(f"Decode throughput (median of {args.repeats}, {CHUNK // 1024} KiB chunks)")
    print(f"{'protocol':<20}{'MB':>8}{'events':>10}{'events/s':>14}")
    for protocol, mb, events, rate in bench_decode(args.size_mb, args.repeats):
        print(f"{protocol:<20}{mb:>8.1f}{events:>10}{rate:>14,.0f}")
    transports: list[tuple[str, Callable[[], httpx.AsyncClient]]] = [
        ("httpx default transport", httpx.AsyncClient),
        ("provider_http_client()", provider_http_client),
    ]
    for name, make_http in transports:
        bare, routed = trio.run(bench_latency, args.requests, make_http)
        print(f"\nPer-request latency over {name}, local server, median of {args.requests}")
        print(f"bare httpx stream     {bare * 1e3:8.3f} ms")
        print(f"ProviderClient.stream {routed * 1e3:8.3f} ms")
        print(f"added                 {(routed - bare) * 1e3:8.3f} ms")
    print(f"\nChunked body of {STREAM_CHUNKS} chunks, median of {args.repeats}, per chunk")
    for name, make_http in transports:
        per_chunk = trio.run(bench_chunks, make_http, args.repeats)
        print(f"{name:<26}{per_chunk * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
