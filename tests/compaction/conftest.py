"""A served runtime (real Hypercorn, real DuckDB) in front of a local chat-completions server
whose model has a small context window, for compaction."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from actors import Configuration
from gateway import Server, serve
from runtime import ModelRef, open_runtime
from runtime.compaction import COMPACTION_PROMPT
from runtime.llm import Auth, Catalog, ProviderClient, RetryPolicy
from tests.gateway.conftest import OPENAPI
from tests.llm.conftest import SAMPLE, LocalServer, Recorded, Reply
from tests.llm.streams import sse

SUMMARY_MARK = COMPACTION_PROMPT.splitlines()[0]
FACT = re.compile(r"FACT-[A-Za-z0-9]+")
MODEL = ModelRef(id="small", provider_id="local")


def chat_reply(text: str, *, prompt_tokens: int = 0) -> Reply:
    """A chat-completions stream answering *text* (with the provider's usage count)."""
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "small"}
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 3,
        "total_tokens": prompt_tokens + 3,
    }
    return Reply(
        chunks=[
            sse(
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}],
                },
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {**chunk, "choices": [], "usage": usage},
                done=True,
            )
        ]
    )


def overflow_reply(window: int) -> Reply:
    """OpenAI's answer to a request over the model's window."""
    message = f"This model's maximum context length is {window} tokens. Please reduce the length."
    error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return Reply(status=400, json_body={"error": error})


def request_tokens(body: dict[str, Any]) -> int:
    """The mock's own count of a request: its messages and tools as JSON, characters / 4."""
    return math.ceil(
        (len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))) / 4
    )


def text_of(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


class ChatMock(LocalServer):
    """A chat-completions server with a small window: it rejects a request over
    ``reject_over`` tokens (default: the window) as OpenAI does, answers summary requests
    with the ``FACT-...`` words it was shown, and other turns with ``answer N``."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window
        self.reject_over = window
        self.sizes: list[int] = []
        self.turns: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []
        self.summary_texts: list[str] = []
        self.overflows = 0
        self.hold_summary = False
        self.hold_turn = False
        self.held = trio.Event()

    def reply_for(self, request: Recorded) -> Reply:
        body = request.json()
        tokens = request_tokens(body)
        self.sizes.append(tokens)
        system = body["messages"][0]["content"] if body["messages"] else ""
        if SUMMARY_MARK in json.dumps(system) or "CUSTOM COMPACTOR" in json.dumps(system):
            self.summaries.append(body)
            if self.hold_summary:
                self.held.set()
                return Reply(chunks=[], hang=True)
            facts = sorted(set(FACT.findall(text_of(body))))
            summary = f"## Goal\nsummary {len(self.summaries)}\n## Key facts and decisions\n" + (
                " ".join(facts)
            )
            self.summary_texts.append(summary)
            return chat_reply(summary, prompt_tokens=tokens)
        self.turns.append(body)
        if tokens > self.reject_over:
            self.overflows += 1
            return overflow_reply(self.window)
        if self.hold_turn:
            self.held.set()
            return Reply(chunks=[], hang=True)
        return chat_reply(f"answer {len(self.turns)}", prompt_tokens=tokens)


async def start_mock(nursery: trio.Nursery, window: int) -> ChatMock:
    mock = ChatMock(window)
    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, mock.handle, 0, host="127.0.0.1")
    )
    mock.port = listeners[0].socket.getsockname()[1]
    return mock


def local_provider(mock: ChatMock, *, output: int) -> dict[str, Any]:
    return {
        "local": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Local",
            "options": {"baseURL": mock.base_url + "/v1"},
            "models": {
                "small": {"name": "small", "limit": {"context": mock.window, "output": output}}
            },
        }
    }


@dataclass
class Compacting:
    rt: Any
    server: Server
    client: httpx.AsyncClient
    mock: ChatMock
    work: Path


@asynccontextmanager
async def compacting(
    tmp_path: Path, mock: ChatMock, *, output: int = 200, config: dict[str, Any] | None = None
) -> AsyncIterator[Compacting]:
    """A runtime served on 127.0.0.1 whose default model is the mock's small one, with a
    ``kittiwake.json`` of *config* in its working directory. Its ``build`` agent has a
    short prompt and no tools, so a request's size is the conversation's (plus the
    baseline), whatever tools and prompts the runtime gains."""
    catalog = Catalog.from_models_dev(json.loads(SAMPLE.read_text())).with_config(
        {"provider": local_provider(mock, output=output)}
    )
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    agent = {"build": {"prompt": "You are a terse test agent.", "tools": {"*": False}}}
    (work / "kittiwake.json").write_text(json.dumps({"agent": agent, **(config or {})}))
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with httpx.AsyncClient() as http:
        llm = ProviderClient(
            catalog, Auth(env={}), http_client=http, retry=RetryPolicy(max_attempts=1)
        )
        async with open_runtime(
            data_dir=tmp_path / "data", llm=llm, default_model=MODEL, configuration=configuration
        ) as rt:
            async with trio.open_nursery() as nursery:
                server: Server = await nursery.start(
                    functools.partial(serve, rt, "127.0.0.1", 0, directory=work)
                )
                try:
                    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                        yield Compacting(rt, server, client, mock, work)
                finally:
                    server.stop()


async def new_session(client: httpx.AsyncClient, work: Path) -> str:
    created = await client.post("/api/session", json={"location": {"directory": str(work)}})
    assert created.status_code == 200, created.text
    return str(created.json()["data"]["id"])


async def prompt(client: httpx.AsyncClient, sid: str, text: str) -> None:
    """Prompt *sid* and wait until it is idle."""
    answer = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
    assert answer.status_code == 200, answer.text
    waited = await client.post(f"/api/session/{sid}/wait")
    assert waited.status_code == 204, waited.text


async def history(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    """Every durable ``session.next.*`` event of *sid*, as served."""
    out: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        params: dict[str, Any] = {"limit": 500}
        if after is not None:
            params["after"] = after
        page = (await client.get(f"/api/session/{sid}/history", params=params)).json()
        out.extend(page["data"])
        if not page["hasMore"] or not page["data"]:
            return out
        after = page["data"][-1]["durable"]["seq"]


def schema(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}", "components": OPENAPI["components"]}


def prompt_text(index: int, padding: int) -> str:
    """A prompt with a unique marker, a fact the summary must keep, and *padding* chars."""
    return f"PROMPT-{index} remember FACT-f{index}. " + ("lorem ipsum " * (padding // 12))
