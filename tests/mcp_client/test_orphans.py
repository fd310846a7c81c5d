"""A local MCP server never outlives Kittiwake: ``kill -9`` of ``kittiwake serve`` takes its
guard, the server and the server's own child down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from tests.gateway.test_cli_run import Cli
from tests.mcp_client.conftest import SERVER, configure, lines
from tests.waiting import serving_url


async def _exited(pid: int) -> None:
    """Return once process *pid* has ended (a pidfd turns readable: no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


async def test_kill_9_of_kittiwake_serve_leaves_no_server_process(tmp_path: Path):
    cli = Cli(tmp_path, None)
    record = tmp_path / "record.jsonl"
    entry = {
        "type": "local", "command": [sys.executable, str(SERVER), "stdio"],
        "environment": {"MCP_RECORD": str(record), "MCP_CHILD": "1"},
    }  # fmt: skip
    configure(cli.project, {"mcp": {"test": entry}})
    serve = await trio.lowlevel.open_process(
        cli.argv("serve", "--port", "0"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd=cli.project, env=cli.env,
    )  # fmt: skip
    try:
        url = await serving_url(serve)
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            status = (await http.get("/mcp")).json()  # answers once the server connected
        assert status == {"test": {"status": "connected"}}
        events = [json.loads(line) for line in lines(record)]
        server = next(e["pid"] for e in events if e["event"] == "start")
        child = next(e["pid"] for e in events if e["event"] == "child")
        guard = os.getpgid(server)
        assert guard != os.getpgid(serve.pid) and os.getpgid(child) == guard
        os.kill(serve.pid, signal.SIGKILL)
        await serve.wait()
        with trio.fail_after(10):  # the guard's grace is 2 s
            for pid in (guard, server, child):
                await _exited(pid)
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
