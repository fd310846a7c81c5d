"""A worker driving a session dies or stalls; another one takes the session over once the
lease expires. Real ``kittiwake serve --store`` processes with a one-second lease, the
local provider in this process, SIGKILL and SIGSTOP/SIGCONT."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import trio

from tests.cluster.harness import Node, last_user_text
from tests.gateway.test_cli_run import Cli, calls_read, chunk, provider, said
from tests.llm.conftest import LocalServer, Recorded, Reply
from tests.llm.streams import sse
from tests.waiting import eventually

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}
LEASE = ("--lease-ttl", "1")


def tool_results(request: Recorded) -> list[dict]:
    return [m for m in request.json()["messages"] if m["role"] == "tool"]


async def promoted_once(client: httpx.AsyncClient, sid: str) -> Counter[str]:
    """How many times each prompt (by message id) was promoted, from the durable history."""
    body = (await client.get(f"{S}/{sid}/history", params={"limit": 1000})).json()
    return Counter(
        e["data"]["messageID"] for e in body["data"] if e["type"] == "session.next.prompt.promoted"
    )


async def test_a_killed_driver_is_taken_over_nothing_lost_or_twice_no_tool_rerun(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    (cli.project / "notes.txt").write_text("the notes\n")
    cut = trio.Event()

    def respond(request: Recorded) -> Reply:
        text = last_user_text(request)
        if text == "p1" and not tool_results(request):
            return calls_read(str(cli.project / "notes.txt"))
        if text == "p1":  # the turn after the tool: the driver is killed in it
            cut.set()
            return Reply(chunks=[sse(chunk({"role": "assistant", "content": "half"}))], hang=True)
        return said(f"re: {text}")

    provider.responder = respond
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Node.running(cli, postgres_database, *LEASE, name="a"))
        b = await stack.enter_async_context(Node.running(cli, postgres_database, *LEASE, name="b"))
        ca = await stack.enter_async_context(httpx.AsyncClient(base_url=a.url, timeout=30))
        cb = await stack.enter_async_context(httpx.AsyncClient(base_url=b.url, timeout=30))
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        assert (await ca.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "p1"}})).is_success
        with trio.fail_after(40):
            await cut.wait()
        a.process.kill()
        killed = time.monotonic()
        await a.process.wait()
        # Admitted through the other worker while the dead one's lease still runs.
        assert (await cb.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "p2"}})).is_success
        with trio.fail_after(40):
            assert (await cb.post(f"{S}/{sid}/wait")).status_code == 204
        taken_over = time.monotonic() - killed
        context = (await cb.get(f"{S}/{sid}/context")).json()["data"]
        promoted = await promoted_once(cb, sid)
    users = [m["text"] for m in context if m["type"] == "user"]
    assert users == ["p1", "p2"]
    assert context[-1]["content"][0]["text"] == "re: p2"
    assert sorted(promoted.values()) == [1, 1]  # nothing promoted twice
    texts = [last_user_text(r) for r in provider.requests]
    assert texts == ["p1", "p1", "p2"]  # the cut turn is not run again
    # The read ran once, before the kill: its result is in the history, not run again.
    assert len(tool_results(provider.requests[1])) == 1
    assert len(tool_results(provider.requests[2])) == 1
    # Not before the lease expired: at least its TTL after its last renewal (1 s - 0.25 s).
    assert 0.7 <= taken_over < 30.0


async def test_a_stopped_driver_resumed_after_a_takeover_writes_nothing(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    asked = trio.Event()

    def respond(request: Recorded) -> Reply:
        text = last_user_text(request)
        if text != "p1":
            return said(f"re: {text}")
        asked.set()  # the rest of the answer comes 3 s later: the driver is stopped by then
        body = [
            sse(chunk({"role": "assistant", "content": "early "})),
            sse(chunk({"content": "LATE"}), chunk({}, finish="stop"), done=True),
        ]
        return Reply(chunks=body, delay=3.0)

    provider.responder = respond
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Node.running(cli, postgres_database, *LEASE, name="a"))
        b = await stack.enter_async_context(Node.running(cli, postgres_database, *LEASE, name="b"))
        ca = await stack.enter_async_context(httpx.AsyncClient(base_url=a.url, timeout=30))
        cb = await stack.enter_async_context(httpx.AsyncClient(base_url=b.url, timeout=30))
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        assert (await ca.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "p1"}})).is_success
        with trio.fail_after(40):
            await asked.wait()
        os.kill(a.process.pid, signal.SIGSTOP)
        try:
            assert (await cb.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "p2"}})).is_success
            with trio.fail_after(40):
                assert (await cb.post(f"{S}/{sid}/wait")).status_code == 204
        finally:
            os.kill(a.process.pid, signal.SIGCONT)
        # The stale driver reads the rest of its answer and tries to write it: refused.
        await eventually(lambda: b"writes refused" in a.stderr)
        events = (await cb.get(f"{S}/{sid}/history", params={"limit": 1000})).json()["data"]
        assert not any("LATE" in str(e["data"]) for e in events)
        # The fenced-off worker drives the session again once it gets the lease.
        assert (await ca.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "p3"}})).is_success
        assert (await ca.post(f"{S}/{sid}/wait")).status_code == 204
        context = (await ca.get(f"{S}/{sid}/context")).json()["data"]
    users = [m["text"] for m in context if m["type"] == "user"]
    assert users == ["p1", "p2", "p3"]
    answers = [
        m["content"][0]["text"] for m in context if m["type"] == "assistant" and m["content"]
    ]
    assert answers[-2:] == ["re: p2", "re: p3"]
    assert not any("LATE" in a for a in answers)
