"""One session through several workers on one PostgreSQL database, each a real
``kittiwake serve --store`` process on its own port: prompts sent to different workers are
admitted once each and answered in order, and the session's event stream on every worker
is the same contiguous sequence of the durable history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from tests.cluster.harness import Node, answer_each, history, last_user_text
from tests.gateway.test_cli_run import Cli, chunk, provider, said
from tests.llm.conftest import LocalServer, Recorded, Reply
from tests.llm.streams import sse
from tests.waiting import eventually

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}


@asynccontextmanager
async def _nodes_a_and_b(
    cli: Cli, store: str
) -> AsyncIterator[tuple[Node, Node, httpx.AsyncClient, httpx.AsyncClient]]:
    """Two ``serve --store`` workers, a and b, on *store*, and an HTTP client for each."""
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Node.running(cli, store, name="a"))
        b = await stack.enter_async_context(Node.running(cli, store, name="b"))
        ca = await stack.enter_async_context(httpx.AsyncClient(base_url=a.url, timeout=30))
        cb = await stack.enter_async_context(httpx.AsyncClient(base_url=b.url, timeout=30))
        yield a, b, ca, cb


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


async def seqs_and_types(client: httpx.AsyncClient, sid: str) -> list[tuple[int, str]]:
    """Every event of the session's history, as (seq, type)."""
    return [(e["durable"]["seq"], e["type"]) for e in await history(client, sid)]


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
            durable = await seqs_and_types(clients[-1], sid)
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


async def test_an_interrupt_through_another_worker_stops_the_driving_one(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    streaming = trio.Event()

    def respond(request: Recorded) -> Reply:
        if last_user_text(request) == "long":
            streaming.set()  # an answer that never ends: only the interrupt stops it
            return Reply(chunks=[sse(chunk({"role": "assistant", "content": "so far"}))], hang=True)
        return said(f"re: {last_user_text(request)}")

    provider.responder = respond
    async with _nodes_a_and_b(cli, postgres_database) as (a, b, ca, cb):
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        assert (await ca.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "long"}})).is_success
        with trio.fail_after(20):
            await streaming.wait()
        assert (await cb.post(f"{S}/{sid}/interrupt")).is_success
        with trio.fail_after(20):
            assert (await cb.post(f"{S}/{sid}/wait")).status_code == 204
        events = (await cb.get(f"{S}/{sid}/history", params={"limit": 1000})).json()["data"]
        # The session goes on, driven by whichever worker takes it next.
        assert (await cb.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "after"}})).is_success
        assert (await ca.post(f"{S}/{sid}/wait")).status_code == 204
        context = (await ca.get(f"{S}/{sid}/context")).json()["data"]
    kinds = [e["type"] for e in events]
    assert "session.next.interrupt.requested" in kinds
    # The driving worker heard of it and closed its step as interrupted, under its lease.
    assert kinds[-1] == "session.next.step.ended"
    assert events[-1]["data"]["finish"] == "interrupted"
    assert context[-1]["content"][0]["text"] == "re: after"
    assert provider.disconnects >= 1  # the driver closed the interrupted provider stream


async def follow_v1(
    url: str, kinds: list[str], payloads: list[dict] | None = None, *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:  # fmt: skip
    """Read the V1 ``/event`` stream on *url* into *kinds* (each event's type) and
    *payloads* (when given) until cancelled; started once its first event
    (``server.connected``) arrived."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=None) as client,
        client.stream("GET", "/event") as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                payload = json.loads(line[6:])
                if payloads is not None:
                    payloads.append(payload)
                kinds.append(payload["type"])
                if len(kinds) == 1:
                    task_status.started()


def calls_shell(command: str) -> Reply:
    """A provider answer calling the shell tool with *command*."""
    call = {
        "index": 0, "id": "call_1", "type": "function",
        "function": {"name": "shell", "arguments": json.dumps({"command": command})},
    }  # fmt: skip
    return Reply(chunks=[sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls"))])


async def test_a_permission_replied_through_another_worker_runs_the_tool_on_the_driving_one(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    (cli.project / "kittiwake.json").write_text(json.dumps({"permission": {"bash": "ask"}}))
    provider.queue(calls_shell("echo ran >> ran.txt"), said("done"))
    async with _nodes_a_and_b(cli, postgres_database) as (a, b, ca, cb):
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        seen: list[tuple[int, str]] = []
        v1: list[str] = []
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, b.url, sid, seen, done)
            await nursery.start(follow_v1, b.url, v1)
            r = await ca.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "run it"}})
            assert r.is_success, r.text

            async def asked() -> list[dict]:
                return (await cb.get(f"{S}/{sid}/permission")).json()["data"]

            await eventually(lambda: "permission.asked" in v1)  # relayed to B's stream
            pending = await asked()
            assert [(p["action"], p["resources"]) for p in pending] == [
                ("bash", ["echo ran >> ran.txt"])
            ]
            assert not (cli.project / "ran.txt").exists()  # the call waits for the reply
            assert len(provider.requests) == 1
            reply = f"{S}/{sid}/permission/{pending[0]['id']}/reply"
            assert (await cb.post(reply, json={"reply": "once"})).status_code == 204
            with trio.fail_after(20):
                assert (await cb.post(f"{S}/{sid}/wait")).status_code == 204
            durable = await seqs_and_types(cb, sid)
            await eventually(lambda: len(seen) >= len(durable) and "permission.replied" in v1)
            done.set()
            nursery.cancel_scope.cancel()
        assert await asked() == []
        context = (await cb.get(f"{S}/{sid}/context")).json()["data"]
    # The tool ran once, on the driving worker, and the answer completed.
    assert (cli.project / "ran.txt").read_text() == "ran\n"
    tool_results = [m for m in provider.requests[1].json()["messages"] if m["role"] == "tool"]
    assert len(provider.requests) == 2 and len(tool_results) == 1
    assert context[-1]["content"][0]["text"] == "done"
    kinds = [t for _, t in durable]
    assert kinds.count("session.next.tool.success") == 1
    assert durable[-1][1] == "session.next.step.ended"
    # B's V1 stream told of the request and of its reply, in that order.
    assert v1.index("permission.asked") < v1.index("permission.replied")
    # B's stream is the durable history: no gap, no duplicate, same order.
    assert seen[: len(durable)] == durable


async def test_a_question_answered_through_another_worker_reaches_the_driving_one(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    color = {
        "question": "Which color?", "header": "Color",
        "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
    }  # fmt: skip
    call = {
        "index": 0, "id": "call_1", "type": "function",
        "function": {"name": "question", "arguments": json.dumps({"questions": [color]})},
    }  # fmt: skip
    provider.queue(
        Reply(chunks=[sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls"))]),
        said("blue then"),
    )
    async with _nodes_a_and_b(cli, postgres_database) as (a, b, ca, cb):
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        v1: list[str] = []
        async with trio.open_nursery() as nursery:
            await nursery.start(follow_v1, b.url, v1)
            r = await ca.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "pick"}})
            assert r.is_success, r.text
            await eventually(lambda: "question.asked" in v1)  # relayed to B's stream
            pending = (await cb.get(f"{S}/{sid}/question")).json()["data"]
            assert [q["questions"][0]["question"] for q in pending] == ["Which color?"]
            assert len(provider.requests) == 1  # the call waits for the answer
            reply = f"{S}/{sid}/question/{pending[0]['id']}/reply"
            assert (await cb.post(reply, json={"answers": [["Blue"]]})).status_code == 204
            with trio.fail_after(20):
                assert (await cb.post(f"{S}/{sid}/wait")).status_code == 204
            await eventually(lambda: "question.replied" in v1)
            nursery.cancel_scope.cancel()
        context = (await cb.get(f"{S}/{sid}/context")).json()["data"]
    tool_results = [m for m in provider.requests[1].json()["messages"] if m["role"] == "tool"]
    assert len(provider.requests) == 2 and "Blue" in str(tool_results)
    # the call took the answer on A: B sent no late answer as a prompt besides
    users = [m["content"] for m in provider.requests[1].json()["messages"] if m["role"] == "user"]
    assert users == ["pick"]
    assert context[-1]["content"][0]["text"] == "blue then"
    assert v1.index("question.asked") < v1.index("question.replied")


def _said(item: dict) -> str:
    """The text of a V1 ``{info, parts}``: a user message's, or an answer's."""
    return next(p["text"] for p in item["parts"] if p["type"] == "text")


async def test_a_prompt_through_another_worker_commits_the_revert_and_says_so(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    """B saw the session without a revert, then A reverts it: a prompt through B still
    drops the reverted messages with a commit, and B's V1 stream sends ``message.removed``."""
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    async with _nodes_a_and_b(cli, postgres_database) as (a, b, ca, cb):
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        for client, text in ((cb, "one"), (ca, "two")):
            assert (
                await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": text}})
            ).is_success
            assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        listed = (await ca.get(f"/session/{sid}/message")).json()
        dropped = [i["info"]["id"] for i in listed[2:]]  # "two" and its answer
        assert [_said(i) for i in listed[2:]] == ["two", "re: two"]
        r = await ca.post(f"/session/{sid}/revert", json={"messageID": dropped[0]})
        assert r.status_code == 200 and r.json()["revert"]["messageID"] == dropped[0], r.text
        kinds: list[str] = []
        payloads: list[dict] = []
        async with trio.open_nursery() as nursery:
            await nursery.start(follow_v1, b.url, kinds, payloads)
            r = await cb.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "three"}})
            assert r.is_success, r.text
            assert (await cb.post(f"{S}/{sid}/wait")).status_code == 204
            await eventually(lambda: kinds.count("message.removed") == 2)
            nursery.cancel_scope.cancel()
        after = (await cb.get(f"/session/{sid}/message")).json()
        info = (await cb.get(f"/session/{sid}")).json()
    removed = [p["properties"] for p in payloads if p["type"] == "message.removed"]
    assert removed == [{"sessionID": sid, "messageID": m} for m in dropped]
    assert [_said(i) for i in after] == ["one", "re: one", "three", "re: three"]
    assert "revert" not in info
