"""A runtime whose Location configures the test MCP server (``server.py``), and the test
server served over HTTP by a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors import Configuration, Runtime
from runtime import Location, open_runtime
from runtime.llm import LLMClient
from runtime.mcp import McpServer
from tests.waiting import eventually

SERVER = Path(__file__).with_name("server.py")
SDK_SSE_GENERATORS = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx_sse|httpx|httpcore)\.[\w.]+' was garbage collected"
    ":ResourceWarning"
)
"""For tests of servers over HTTP: the SDK's Streamable HTTP client leaves the SSE answer
of each request by ``return`` from inside ``async for sse in event_source.aiter_sse()``
(mcp 1.30.0, ``client/streamable_http.py``), so trio closes that generator (and the
httpx ones under it) when it is collected, with a ResourceWarning each time."""


def local(record: Path | None = None, **extra: Any) -> dict[str, Any]:
    """The test server as a local (stdio) ``mcp`` entry, recording to *record*."""
    entry: dict[str, Any] = {"type": "local", "command": [sys.executable, str(SERVER), "stdio"]}
    if record is not None:
        entry["environment"] = {"MCP_RECORD": str(record)}
    return {**entry, **extra}


def configure(work: Path, config: dict[str, Any]) -> None:
    (work / "kittiwake.json").write_text(json.dumps(config))


@asynccontextmanager
async def mcp_runtime(
    tmp_path: Path, config: dict[str, Any], llm: LLMClient, **options: Any
) -> AsyncIterator[tuple[Runtime, Path]]:
    """A runtime (real DuckDB) with configuration on, and the Location *config* is
    written in (``tmp_path/project``)."""
    work = tmp_path / "project"
    work.mkdir(parents=True, exist_ok=True)
    configure(work, config)
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with open_runtime(
        data_dir=tmp_path / "data", llm=llm, configuration=configuration, **options
    ) as rt:
        yield rt, work


async def connected(rt: Runtime, work: Path, name: str = "test", *, starts: int = 1) -> McpServer:
    """The Location's server *name* once it is connected (for the *starts*-th time)."""
    location = await rt.execution.location(str(work))

    def ready() -> bool:
        server = location.mcp.servers.get(name)
        return server is not None and server.status == "connected" and server.starts >= starts

    await eventually(ready)
    return location.mcp.servers[name]


async def new_session(rt: Runtime, work: Path) -> str:
    return (await rt.sessions.create(location=Location(directory=str(work)))).id


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_server(transport: str = "http") -> AsyncIterator[str]:
    """The test server over Streamable HTTP (``http``) or SSE (``sse``) on 127.0.0.1, in a
    subprocess; its base URL once it listens."""
    port = free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), transport, str(port)], stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stderr is not None
    stderr = process.stderr

    async def drain() -> None:  # its request log, read so that the pipe never fills
        while await stderr.receive_some(65536):
            pass

    try:
        seen = b""
        with trio.fail_after(30):
            while b"Uvicorn running" not in seen:
                chunk = await stderr.receive_some(4096)
                assert chunk, seen.decode()
                seen += chunk
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            yield f"http://127.0.0.1:{port}"
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def lines(path: Path) -> list[str]:
    """The lines the server recorded (read after it wrote them)."""
    return path.read_text().splitlines()


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "record.jsonl"


OAUTH_SERVER = Path(__file__).with_name("oauth_server.py")


@asynccontextmanager
async def oauth_servers(*flags: str) -> AsyncIterator[tuple[str, str]]:
    """The protected MCP server and its authorization server (``oauth_server.py``) in a
    subprocess; ``(authorization server URL, MCP URL)`` once both listen."""
    issuer, resource = free_port(), free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, str(OAUTH_SERVER), str(issuer), str(resource), *flags],
        stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stderr is not None
    stderr = process.stderr

    async def drain() -> None:  # its request log, read so that the pipe never fills
        while await stderr.receive_some(65536):
            pass

    try:
        seen = b""
        with trio.fail_after(30):
            while b"oauth-ready" not in seen:
                chunk = await stderr.receive_some(4096)
                assert chunk, seen.decode()
                seen += chunk
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            yield f"http://127.0.0.1:{issuer}", f"http://127.0.0.1:{resource}/mcp"
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
