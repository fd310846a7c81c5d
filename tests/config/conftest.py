"""``kittiwake serve`` in a subprocess, configured only by files and variables, in front of a
local server speaking OpenAI's chat-completions wire format."""

from __future__ import annotations

import functools
import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.llm.conftest import LocalServer, Reply
from tests.llm.streams import sse

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


def chat_text(text: str) -> Reply:
    """A chat-completions stream answering *text*."""
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return Reply(
        chunks=[
            sse(
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}],
                },
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                done=True,
            )
        ]
    )


def chat_tool_call(name: str, arguments: dict[str, Any]) -> Reply:
    """A chat-completions stream calling tool *name* once."""
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    call = {
        "index": 0, "id": "call_1", "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }  # fmt: skip
    return Reply(
        chunks=[
            sse(
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}],
                },
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                done=True,
            )
        ]
    )


@pytest.fixture
async def provider(nursery: trio.Nursery) -> LocalServer:
    srv = LocalServer()
    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, srv.handle, 0, host="127.0.0.1")
    )
    srv.port = listeners[0].socket.getsockname()[1]
    return srv


def local_provider(port: int, *models: str) -> dict[str, Any]:
    """A ``provider`` entry for the local server: no API-key variable, no catalog entry."""
    return {
        "local": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Local",
            "options": {"baseURL": f"http://127.0.0.1:{port}/v1"},
            "models": {m: {"name": m, "limit": {"context": 8000, "output": 1000}} for m in models},
        }
    }


def base_env(tmp: Path) -> dict[str, str]:
    """A clean environment: no provider keys, a home and data dir of the test's own."""
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp / "home"),
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "KITTIWAKE_DATA_DIR": str(tmp / "data"),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Serve:
    url: str
    process: trio.Process
    stderr: list[bytes] = field(default_factory=list)

    @property
    def errors(self) -> str:
        return b"".join(self.stderr).decode()


async def _collect(stream: Any, into: list[bytes]) -> None:
    async for chunk in stream:
        into.append(chunk)


@asynccontextmanager
async def serving(
    env: dict[str, str], cwd: Path, python: str = sys.executable, args: Sequence[str] = ()
) -> AsyncIterator[Serve]:
    """``kittiwake serve`` in *cwd* (with the options *args*), run by the interpreter
    *python*, until the block ends (then SIGTERM, waited for)."""
    port = free_port()
    command = [python, "-m", "gateway", "serve", "--port", str(port), *args]
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            command, cwd=str(cwd), env=env, stdout=-1, stderr=-1
        )
        serve = Serve(url=f"http://127.0.0.1:{port}", process=process)
        nursery.start_soon(_collect, process.stderr, serve.stderr)
        out = b""
        try:
            with trio.fail_after(START_TIMEOUT):
                async for chunk in process.stdout:
                    out += chunk
                    if b"kittiwake: serving" in out:
                        break
            assert b"kittiwake: serving" in out, serve.errors
            nursery.start_soon(_collect, process.stdout, [])
            yield serve
        finally:
            process.terminate()
            with trio.fail_after(20):
                await process.wait()
            nursery.cancel_scope.cancel()


async def run_serve_to_exit(
    env: dict[str, str], cwd: Path, args: Sequence[str] = ()
) -> trio.CompletedProcess[bytes]:
    """``kittiwake serve`` (with the options *args*) expected to stop by itself (a start-up
    failure)."""
    with trio.fail_after(START_TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), *args],
            cwd=str(cwd), env=env, capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip


async def prompt(client: httpx.AsyncClient, sid: str, text: str) -> list[dict[str, Any]]:
    """Prompt session *sid*, wait until it is idle, and return the events after the prompt."""
    answer = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
    assert answer.status_code == 200, answer.text
    admitted = answer.json()["data"]["admittedSeq"]
    waited = await client.post(f"/api/session/{sid}/wait", timeout=30)
    assert waited.status_code == 204, waited.text
    history = await client.get(f"/api/session/{sid}/history", params={"limit": 500})
    events = [
        {"type": item["type"], "data": item["data"]}
        for item in history.json()["data"]
        if item["durable"]["seq"] > admitted
    ]
    return events


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["text"] for e in events if e["type"] == "session.next.text.ended"]


async def new_session(client: httpx.AsyncClient, directory: Path, **fields: Any) -> str:
    body = {"location": {"directory": str(directory)}, **fields}
    created = await client.post("/api/session", json=body)
    assert created.status_code == 200, created.text
    return str(created.json()["data"]["id"])
