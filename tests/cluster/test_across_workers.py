"""One session through several workers on one PostgreSQL database, each a real
``kittiwake serve --store`` process on its own port: prompts sent to different workers are
admitted once each and answered in order, and the session's event stream on every worker
is the same contiguous sequence of the durable history."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
import trio

from tests.cluster.harness import Node, answer_each, last_user_text
from tests.gateway.test_cli_run import Cli, provider
from tests.llm.conftest import LocalServer
from tests.waiting import eventually

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}


async def follow(url: str, sid: str, seen: list[tuple[int, str]], until: trio.Event) -> None:
    """Read the session's SSE stream on *url* into *seen* (seq, type) until *until*."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=None) as client,
        client.stream("GET", f"{S}/{sid}/event") as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                seen.append((event["durable"]["seq"], event["type"]))
            if until.is_set():
                return


async def history(client: httpx.AsyncClient, sid: str) -> list[tuple[int, str]]:
    """Every durable ``session.next.*`` event of the session, as (seq, type)."""
    out: list[tuple[int, str]] = []
    after = -1
    while True:
        body = (await client.get(f"{S}/{sid}/history", params={"after": after})).json()
        out += [(e["durable"]["seq"], e["type"]) for e in body["data"]]
        if not body["hasMore"]:
            return out
        after = out[-1][0]


@pytest.mark.parametrize("count", [2, 3])
async def test_prompts_through_different_workers_are_admitted_once_answered_in_order(
    tmp_path: Path, provider: LocalServer, postgres_database: str, count: int
) -> None:
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    async with AsyncExitStack() as stack:
        nodes: list[Node] = []

        for n in range(count):
            nodes.append(
                await stack.enter_async_context(Node.running(cli, postgres_database, name=str(n)))
            )
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=n.url, timeout=30))
            for n in nodes
        ]
        sid = (await clients[0].post(S, json={"model": MODEL})).json()["data"]["id"]
        streams: list[list[tuple[int, str]]] = [[] for _ in nodes]
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            for node, seen in zip(nodes, streams, strict=True):
                nursery.start_soon(follow, node.url, sid, seen, done)
            texts = [f"p{i}" for i in range(count + 1)]  # through every worker, one twice
            for i, text in enumerate(texts):
                # Sent to one worker, waited for on the next one.
                r = await clients[i % count].post(
                    f"{S}/{sid}/prompt", json={"prompt": {"text": text}}
                )
                assert r.status_code == 200, r.text
                assert (await clients[(i + 1) % count].post(f"{S}/{sid}/wait")).status_code == 204
            durable = await history(clients[-1], sid)
            await eventually(lambda: all(len(seen) >= len(durable) for seen in streams))
            done.set()
            nursery.cancel_scope.cancel()
        context = (await clients[1].get(f"{S}/{sid}/context")).json()["data"]
    said = [m["text"] if m["type"] == "user" else m["content"][0]["text"] for m in context]
    assert said == [t for text in texts for t in (text, f"re: {text}")]
    # Each prompt reached the provider once, in order: admitted once, promoted once.
    assert [last_user_text(r) for r in provider.requests] == texts
    # Every worker's stream is the durable history: no gap, no duplicate, same order.
    for seen in streams:
        assert seen[: len(durable)] == durable
    assert [t for _, t in durable].count("session.next.prompt.admitted") == len(texts)
