"""MCP servers: start-up with N local servers against none, a tool's round trip over
stdio and Streamable HTTP against a built-in tool's, the memory of a local server, and
the size of a provider request with many MCP tools, with and without tool search.

Run: .venv/bin/python bench/mcp_servers.py [--servers 5] [--calls 200] [--tools 300]
     .venv/bin/python bench/mcp_servers.py --only size   (the request sizes alone)

Uses the test server (``tests/mcp_client/server.py``, FastMCP). Start-up: a runtime is
opened and its Location too; reported are the time until the Location is open (what a
prompt waits for), the time until every server is connected, and a first prompt's round
trip (scripted model, no tool) while the servers are still connecting. Round trips are
``registry.settle`` calls (permission, bounding and all, as a turn makes them): the MCP
``add`` tool over stdio and over HTTP, and the built-in ``read`` of a small file. Memory:
the RSS of each local server's guard and server processes, and Kittiwake's own growth
from importing the ``mcp`` package.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import msgspec
import trio

from actors import Configuration
from runtime import Location, open_runtime
from runtime.agents import BUILD
from runtime.llm import LLMRequest, ScriptedLLM
from runtime.tools import ToolContext, ToolSuccess
from tests.execution.conftest import answer, prompt
from tests.mcp_client.conftest import SERVER, configure, http_server, lines, local


def rss_kib(pid: int | str) -> int:
    """The resident set of process *pid* (``self`` for this one), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def project(root: Path, name: str, config: dict[str, Any]) -> Path:
    """A Location folder under *root* configured with *config* (blocking)."""
    work = root / name
    work.mkdir(parents=True)
    configure(work, config)
    (work / "small.txt").write_text("one line\n")
    return work


async def startup(servers: int, root: Path, run: int) -> dict[str, float]:
    """Seconds to open the Location, to connect every server, and for a first prompt."""
    config = {"mcp": {f"s{i}": local() for i in range(servers)}}
    work = project(root, f"start-{servers}-{run}", config)
    client = ScriptedLLM([answer("hi")])
    configuration = Configuration(env={"HOME": str(root)})
    began = time.perf_counter()
    async with open_runtime(data_dir=work / "data", llm=client, configuration=configuration) as rt:
        location = await rt.execution.current_location(str(work))
        opened = time.perf_counter() - began
        info = await rt.sessions.create(location=Location(directory=str(work)))
        sent = time.perf_counter()
        await rt.sessions.prompt(info.id, prompt=prompt("hello"))
        await rt.sessions.wait_idle(info.id)
        first = time.perf_counter() - sent
        await location.mcp.settled()
        connected = time.perf_counter() - began
        assert all(s.status == "connected" for s in location.mcp.servers.values())
    return {"open": opened, "connected": connected if servers else opened, "first": first}


async def round_trips(calls: int, root: Path) -> dict[str, list[float]]:
    """Seconds per settle: MCP ``add`` over stdio and HTTP, built-in ``read``."""
    out: dict[str, list[float]] = {}
    async with http_server() as base:
        config = {"mcp": {"io": local(), "web": {"type": "remote", "url": f"{base}/mcp"}}}
        work = project(root, "trips", config)
        configuration = Configuration(env={"HOME": str(root)})
        async with open_runtime(
            data_dir=work / "data", llm=ScriptedLLM([]), configuration=configuration
        ) as rt:
            location = await rt.execution.current_location(str(work))
            await location.mcp.settled()
            location.mcp.apply()
            cases: list[tuple[str, str, dict[str, Any]]] = [
                ("stdio", "io_add", {"a": 2, "b": 3}),
                ("http", "web_add", {"a": 2, "b": 3}),
                ("built-in read", "read", {"filePath": "small.txt"}),
            ]
            for label, tool, data in cases:
                ctx = ToolContext(
                    session_id="ses_bench", agent="build", assistant_message_id="msg_bench",
                    tool_call_id="call_bench", directory=str(work),
                )  # fmt: skip
                times = []
                for _ in range(calls):
                    began = time.perf_counter()
                    done = await location.registry.settle(tool, data, ctx, agent=BUILD)
                    times.append(time.perf_counter() - began)
                    assert isinstance(done, ToolSuccess), done
                out[label] = times
    return out


_SDK_IMPORT = (
    "import re\n"
    "def rss():\n"
    "    return int(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
    "import trio, httpx, msgspec\n"
    "before = rss()\n"
    "import mcp, mcp.client.sse, mcp.client.streamable_http\n"
    "print(rss() - before)\n"
)


def _devnull() -> IO[str]:
    return open(os.devnull, "w")  # noqa: SIM115 - the caller closes it


async def sdk_alone(calls: int) -> list[float]:
    """Seconds per ``tools/call`` of the SDK's own client, no guard, no registry."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER), "stdio"], env=dict(os.environ)
    )
    times = []
    with _devnull() as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                for _ in range(calls):
                    began = time.perf_counter()
                    await session.call_tool("add", {"a": 2, "b": 3})
                    times.append(time.perf_counter() - began)
    return times


async def memory(root: Path) -> dict[str, int]:
    """KiB: one local server's guard and server, and the ``mcp`` package's import."""
    record = root / "memory.jsonl"
    work = project(root, "memory", {"mcp": {"one": local(record)}})
    done = await trio.run_process([sys.executable, "-c", _SDK_IMPORT], capture_stdout=True)
    async with open_runtime(
        data_dir=work / "data", llm=ScriptedLLM([]),
        configuration=Configuration(env={"HOME": str(root)}),
    ) as rt:  # fmt: skip
        location = await rt.execution.current_location(str(work))
        await location.mcp.settled()
        await trio.sleep(0.5)  # let the server settle after its start
        server_pid = json.loads(lines(record)[0])["pid"]
        guard_pid = os.getpgid(server_pid)
        return {
            "guard": rss_kib(guard_pid), "server": rss_kib(server_pid),
            "sdk_import": int(done.stdout),
        }  # fmt: skip


BASE_TOOLS = 12
"""The tools the test server lists besides its ``MCP_TOOLS`` ledgers."""


async def first_request(root: Path, name: str, config: dict[str, Any]) -> LLMRequest:
    """The first provider request of a session in a Location configured with *config*,
    once its servers are connected."""
    work = project(root, name, config)
    client = ScriptedLLM([answer("hi")])
    configuration = Configuration(env={"HOME": str(root)})
    async with open_runtime(data_dir=work / "data", llm=client, configuration=configuration) as rt:
        location = await rt.execution.current_location(str(work))
        await location.mcp.settled()
        info = await rt.sessions.create(location=Location(directory=str(work)))
        await rt.sessions.prompt(info.id, prompt=prompt("hello"))
        await rt.sessions.wait_idle(info.id)
    (request,) = client.requests
    return request


async def request_sizes(tools: int, root: Path) -> dict[str, tuple[int, int, int]]:
    """Per case: (tools offered, bytes of the request as JSON, bytes of its tools)."""

    def servers(total: int) -> dict[str, Any]:
        per = [total // 3 + (1 if i < total % 3 else 0) for i in range(3)]
        env = [{"MCP_TOOLS": str(max(0, n - BASE_TOOLS))} for n in per]
        return {f"s{i}": local(environment=e) for i, e in enumerate(env) if per[i]}

    cases = {
        f"{tools} MCP tools, tool search on": {"mcp": servers(tools)},
        f"{tools} MCP tools, tool search off": {
            "mcp": servers(tools), "experimental": {"mcp_tool_search": False},
        },
        "40 MCP tools": {"mcp": {"s0": local(environment={"MCP_TOOLS": str(40 - BASE_TOOLS)})}},
        "no MCP server": {},
    }  # fmt: skip
    out = {}
    for i, (label, config) in enumerate(cases.items()):
        request = await first_request(root, f"size-{i}", config)
        out[label] = (
            len(request.tools),
            len(msgspec.json.encode(request)),
            len(msgspec.json.encode(request.tools)),
        )
    return out


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f} ms"


async def main(servers: int, calls: int, tools: int, only: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for label, (count, whole, defined) in (await request_sizes(tools, root)).items():
            print(f"request, {label}: {count} tools, {whole} B ({defined} B of tools)")
        if only == "size":
            return
        for n in (0, servers):
            runs = [await startup(n, root, i) for i in range(3)]
            keys = runs[0].keys()
            print(f"start-up, {n} local servers: " + ", ".join(
                f"{k} {statistics.median(r[k] for r in runs) * 1000:.0f} ms" for k in keys
            ))  # fmt: skip
        trips = await round_trips(calls, root)
        trips["stdio, the SDK's client alone"] = await sdk_alone(calls)
        for label, times in trips.items():
            print(f"round trip {label}: median {ms(times)} over {len(times)} calls")
        used = await memory(root)
        print(
            f"RSS: guard {used['guard'] / 1024:.1f} MiB, test server {used['server'] / 1024:.1f}"
            f" MiB; importing the mcp package: +{used['sdk_import'] / 1024:.1f} MiB"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tools", type=int, default=300)
    parser.add_argument("--only", choices=["size"])
    args = parser.parse_args()
    trio.run(main, args.servers, args.calls, args.tools, args.only)
