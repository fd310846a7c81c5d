"""The Python SDK (``kittiwake_sdk``) against a served runtime with the scripted model: the
flows a client drives (create, prompt, wait, permission reply, interrupt, errors as typed
exceptions), the event stream resuming by seq across a server restart, the synchronous
client, and the asynchronous one under asyncio."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from functools import partial
from pathlib import Path

import kittiwake_sdk as sdk
import pytest
import trio

from gateway import serve
from runtime import open_runtime
from runtime.llm import ScriptedLLM
from tests.gateway.conftest import answer, echo_llm, served
from tests.gateway.test_permissions import AGENTS, shell
from tests.waiting import eventually

# httpx's streaming iterators are nested async generators; leaving a stream early lets the
# inner ones be collected unexhausted, which trio reports. The streams themselves are closed.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object Response.aiter"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object "
        "(HTTP11ConnectionByteStream|PoolByteStream|AsyncHTTP11Connection|BoundAsyncStream"
        "|AsyncResponseStream)"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


async def _asked(client: sdk.AsyncClient, sid: str) -> list[sdk.PermissionV2Request]:
    """The session's pending permission requests once its tool call has asked."""
    async with aclosing(client.session_events(sid).__aiter__()) as events:
        async for event in events:
            if event.type == "permission.v2.asked":
                break
    return await client.session_permission_list(sid)


async def test_create_prompt_wait_permission_reply_interrupt_and_errors(tmp_path: Path) -> None:
    llm = ScriptedLLM([shell("c1", "echo yes > proof.txt"), answer("done"), shell("c2", "ls")])
    work = tmp_path / "work"
    work.mkdir()
    async with served(tmp_path, llm=llm, agents=AGENTS) as g:
        async with sdk.AsyncClient(g.url) as client:
            assert (await client.health_get()).healthy is True
            info = await client.session_create(
                agent="careful", location=sdk.Location(directory=str(work)), title="sdk"
            )
            assert info.id.startswith("ses") and info.title == "sdk" and info.agent == "careful"
            receipt = await client.session_prompt(info.id, prompt=sdk.Prompt(text="run it"))
            assert receipt.session_id == info.id and receipt.delivery == "steer"

            [request] = await _asked(client, info.id)
            assert request.action == "bash" and request.session_id == info.id
            await client.session_permission_reply(info.id, request.id, reply="once")
            await client.session_wait(info.id)
            assert (work / "proof.txt").read_text() == "yes\n"

            context = await client.session_context(info.id)
            assert [type(m).__name__ for m in context] == [
                "UserMessage", "AssistantMessage", "AssistantMessage",
            ]  # fmt: skip
            user, tool_turn, last = context
            assert isinstance(user, sdk.UserMessage) and user.text == "run it"
            assert isinstance(tool_turn, sdk.AssistantMessage)
            [call] = tool_turn.content
            assert isinstance(call, sdk.AssistantTool)
            assert isinstance(call.state, sdk.ToolCompleted)  # decoded by its status tag
            assert isinstance(last, sdk.AssistantMessage)
            assert [c.text for c in last.content if isinstance(c, sdk.AssistantText)] == ["done"]
            page = await client.session_messages(info.id, limit=1)
            assert len(page.data) == 1 and page.cursor.next is not None

            # Errors raise the exception of their `_tag`, with the body's fields.
            with pytest.raises(sdk.ConflictError) as answered:
                await client.session_permission_reply(info.id, request.id, reply="once")
            assert answered.value.status == 409 and answered.value.tag == "ConflictError"
            with pytest.raises(sdk.PermissionNotFoundError):
                await client.session_permission_reply(info.id, "per_missing", reply="once")
            with pytest.raises(sdk.SessionNotFoundError) as missing:
                await client.session_get("ses_missing")
            assert missing.value.body["sessionID"] == "ses_missing"
            with pytest.raises(sdk.ConflictError):  # a prompt id reused for another text
                await client.session_prompt(info.id, prompt=sdk.Prompt(text="x"), id=receipt.id)
            with pytest.raises(sdk.InvalidRequestError):
                await client.session_messages(info.id, limit="many")
            with pytest.raises(sdk.KittiwakeError):  # the base of them all
                await client.session_context("ses_missing")

            # Interrupting a turn that waits on a permission ends it; the session is idle.
            await client.session_prompt(info.id, prompt=sdk.Prompt(text="list"))
            [request] = await _asked(client, info.id)
            await client.session_interrupt(info.id)
            await client.session_wait(info.id)
            assert await client.session_permission_list(info.id) == []
            assert (await client.session_active()) == {"data": {}}
            with pytest.raises(sdk.SessionNotFoundError):
                await client.session_interrupt("ses_missing")


async def test_the_event_stream_resumes_by_seq_across_a_server_restart(tmp_path: Path) -> None:
    """One stream's connection is dropped by a restart of the server (the runtime closed and
    opened again from its DuckDB file, served on the same port); it reconnects and goes on
    with no gap and no duplicate, the events committed while it was down included."""
    sid = "ses_sdkstream"
    seqs: list[int] = []

    async def consume(client: sdk.AsyncClient) -> None:
        async with aclosing(client.session_events(sid).__aiter__()) as events:
            async for event in events:
                seqs.append(event.seq)

    async def run_once(port: int, text: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with open_runtime(data_dir=tmp_path / "data", llm=echo_llm()) as rt:
            async with trio.open_nursery() as nursery:
                server = await nursery.start(
                    partial(serve, rt, "127.0.0.1", port, directory=tmp_path)
                )
                async with sdk.AsyncClient(server.url) as client:
                    if text == "one":
                        await client.session_create(id=sid)
                    task_status.started(server.url)
                    await client.session_prompt(sid, prompt=sdk.Prompt(text=text))
                    await client.session_wait(sid)
                    logged = len((await client.session_history(sid, limit=1000))["data"])
                    await eventually(lambda: seqs[-1:] == [logged])  # streamed before the stop
                server.stop()

    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as first:  # ends once the first server is stopped
            url = await first.start(run_once, 0, "one")
            client = sdk.AsyncClient(url, retry_delay=0.05, reconnects=400)
            outer.start_soon(consume, client)
        before = len(seqs)
        async with trio.open_nursery() as second:
            await second.start(run_once, int(url.rsplit(":", 1)[1]), "two")
        outer.cancel_scope.cancel()
    await client.aclose()
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) > before > 3  # both turns' events


async def test_the_sync_client_and_the_async_one_under_asyncio(tmp_path: Path) -> None:
    """The same routes through ``Client`` (synchronous) and ``AsyncClient`` under asyncio,
    each in a thread of its own beside the trio server."""

    def sync_flow(url: str) -> list[str]:
        with sdk.Client(url) as client:
            sid = client.session_create(title="sync").id
            client.session_prompt(sid, prompt=sdk.Prompt(text="hi"))
            client.session_wait(sid)
            with pytest.raises(sdk.SessionNotFoundError):
                client.session_wait("ses_missing")
            return [type(m).__name__ for m in client.session_context(sid)]

    async def asyncio_flow(url: str) -> list[int]:
        async with sdk.AsyncClient(url) as client:
            sid = (await client.session_create()).id
            await client.session_prompt(sid, prompt=sdk.Prompt(text="hi"))
            await client.session_wait(sid)
            with pytest.raises(sdk.SessionNotFoundError):
                await client.session_get("ses_missing")
            logged = len((await client.session_history(sid, limit=1000))["data"])
            seqs = []
            async with aclosing(client.session_events(sid).__aiter__()) as events:
                async for event in events:
                    seqs.append(event.seq)
                    if event.seq == logged:
                        break
            return seqs

    async with served(tmp_path) as g:
        names = await trio.to_thread.run_sync(sync_flow, g.url)
        assert names == ["UserMessage", "AssistantMessage"]
        seqs = await trio.to_thread.run_sync(lambda: asyncio.run(asyncio_flow(g.url)))
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 3
