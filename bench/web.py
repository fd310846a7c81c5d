"""``webfetch`` of a 1 MB HTML page from a local server, against a bare httpx GET.

Run: .venv/bin/python bench/web.py [--kilobytes N] [--runs R]

Serves an HTML page of N KB (default 1000: paragraphs, links, a list, a table) from a
trio + h11 server on 127.0.0.1 and reports the median wall time of
``settle("webfetch", {"url": ..., "format": f})`` for each format, of a bare
``httpx.AsyncClient.get`` of the same page, and of ``html_to_markdown`` alone.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import httpx
import trio

from runtime.agents import BUILD
from runtime.tools import (
    AddressPolicy,
    ToolContext,
    ToolEnvironment,
    ToolRegistry,
    ToolSuccess,
    WebFetchLimits,
    html_to_markdown,
    webfetch_tool,
)
from tests.tools.web_server import Page, web_server

CTX = ToolContext(
    session_id="ses_bench", agent="build", assistant_message_id="msg_bench",
    tool_call_id="call_bench", directory=".",
)  # fmt: skip


def page(kilobytes: int) -> bytes:
    block = (
        "<h2>Section {i}</h2><p>The <b>kittiwake</b> nests on <a href='/cliff/{i}'>cliffs</a> "
        "and feeds at sea; entry {i} of the survey.</p><ul><li>count {i}</li><li>site {i}</li>"
        "</ul><table><tr><th>year</th><th>pairs</th></tr><tr><td>{i}</td><td>{i}</td></tr>"
        "</table>\n"
    )
    parts, size, i = [], 0, 0
    while size < kilobytes * 1000:
        text = block.format(i=i)
        parts.append(text)
        size += len(text)
        i += 1
    return ("<html><head><title>Survey</title></head><body>" + "".join(parts)).encode() + (
        b"</body></html>"
    )


async def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def main(kilobytes: int, runs: int) -> None:
    body = page(kilobytes)
    limits = WebFetchLimits(policy=AddressPolicy(allow_loopback=True), max_bytes=10_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        env = ToolEnvironment(directory=tmp, data_dir=tmp)
        registry = ToolRegistry(env)
        registry.contribute(webfetch_tool(limits))
        async with web_server() as server:
            server.page("/page", Page(body=body))
            url = server.url("/page")
            results: dict[str, float] = {}
            for fmt in ("markdown", "text", "html"):

                async def fetch(fmt: str = fmt) -> None:
                    result = await registry.settle(
                        "webfetch", {"url": url, "format": fmt}, CTX, agent=BUILD
                    )
                    assert isinstance(result, ToolSuccess), result

                results[f"webfetch {fmt} via settle"] = await timed(fetch, runs)

            async def bare() -> None:
                async with httpx.AsyncClient() as client:
                    response = await client.get(url)
                    assert len(response.content) == len(body)

            results["bare httpx GET"] = await timed(bare, runs)

            async def convert() -> None:
                await trio.lowlevel.checkpoint()
                html_to_markdown(body.decode())

            results["html_to_markdown alone"] = await timed(convert, runs)
    print(f"page: {len(body) / 1e6:.2f} MB, median of {runs} runs")
    for name, seconds in results.items():
        print(f"  {name:32s} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kilobytes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    trio.run(main, args.kilobytes, args.runs)
