"""The websocket client: 200 sessions watched over one connection, across a restart of the
server (the runtime reopened from its DuckDB file on the same port), with no gap and no
duplicate in any session's seqs."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import kittiwake_sdk as sdk
import pytest
import trio

from gateway import WebsocketLimits, serve
from runtime import open_runtime
from runtime.llm import ScriptedLLM
from tests.gateway.conftest import answer, echo_llm, served
from tests.waiting import eventually

SESSIONS = 200


async def test_200_sessions_over_one_connection_across_a_server_restart(tmp_path: Path) -> None:
    ids = [f"ses_watch{i:03d}" for i in range(SESSIONS)]
    seen: dict[str, list[int]] = {sid: [] for sid in ids}
    logged: dict[str, int] = {}
    limits = WebsocketLimits(max_subscriptions=SESSIONS)

    async def run_once(port: int, text: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with open_runtime(data_dir=tmp_path / "data", llm=echo_llm()) as rt:
            async with trio.open_nursery() as nursery:
                server = await nursery.start(
                    partial(serve, rt, "127.0.0.1", port, directory=tmp_path, ws_limits=limits)
                )
                async with sdk.AsyncClient(server.url) as client:
                    if text == "one":
                        for sid in ids:
                            await client.session_create(id=sid)
                    task_status.started(server.url)
                    for sid in ids[: SESSIONS // 2] if text == "one" else ids[::2]:
                        await client.session_prompt(sid, prompt=sdk.Prompt(text=text))
                    for sid in ids:
                        await client.session_wait(sid)
                        logged[sid] = len((await client.session_history(sid, limit=1000))["data"])
                    await eventually(lambda: all(len(seen[s]) == logged[s] for s in ids))
                server.stop()

    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as first:  # ends once the first server is stopped
            url = await first.start(run_once, 0, "one")
            watcher = sdk.Watcher(url, ids, retry_delay=0.05, reconnects=400)

            async def consume() -> None:
                async with watcher.open() as events:
                    async for item in events:
                        seen[item.session_id].append(item.event.seq)

            outer.start_soon(consume)
        before = sum(map(len, seen.values()))
        async with trio.open_nursery() as second:
            await second.start(run_once, int(url.rsplit(":", 1)[1]), "two")
        outer.cancel_scope.cancel()
    assert watcher.connections >= 2  # the restart closed the first connection
    for sid in ids:
        assert seen[sid] == list(range(1, logged[sid] + 1)), sid
    assert sum(map(len, seen.values())) > before > SESSIONS


async def test_a_consumer_too_slow_is_closed_by_the_server_and_resumes(tmp_path: Path) -> None:
    """Backpressure: the consumer takes nothing until every turn is done; the watcher stops
    reading at its buffer, the server's queue for the connection fills, and the server
    closes it (1013); the watcher connects again and resumes each session by seq."""
    limits = WebsocketLimits(max_pending=4, stall_timeout=1.0)
    # Answers of 1.5 MB each, 24 MB in all: more than the watcher (a few messages in its
    # channel and in trio-websocket's queue), the server's queue (``max_pending`` frames) and
    # the sockets' buffers (the server's send buffer grows to 4 MB) hold while it is not
    # reading.
    llm = ScriptedLLM(lambda request: answer("x" * 1_500_000, chunks=2))
    async with (
        served(tmp_path, llm=llm, ws_limits=limits) as g,
        sdk.AsyncClient(g.url, timeout=60) as client,
    ):
        ids = [(await client.session_create()).id for _ in range(16)]
        # The socket's buffer bounded: the system's may grow past the 12 MB on loopback.
        watcher = sdk.Watcher(g.url, ids, buffer=1, retry_delay=0.05, socket_buffer=65536)
        seen: dict[str, list[int]] = {sid: [] for sid in ids}
        async with watcher.open() as events:
            for sid in ids:
                await client.session_prompt(sid, prompt=sdk.Prompt(text="hi"))
            for sid in ids:
                await client.session_wait(sid)
            logged = {
                sid: len((await client.session_history(sid, limit=1000))["data"]) for sid in ids
            }
            total = sum(logged.values())
            with trio.fail_after(30):
                async for item in events:
                    seen[item.session_id].append(item.event.seq)
                    total -= 1
                    if total == 0:
                        break
        assert watcher.connections >= 2  # the server closed the slow one
        for sid in ids:
            assert seen[sid] == list(range(1, logged[sid] + 1)), sid


async def _lines_until(proc: trio.Process, buffer: bytearray, done) -> list[str]:
    """The child's output lines once *done* holds of them; fails after 30 s."""
    assert proc.stdout is not None
    with trio.fail_after(30):
        while not done(buffer.decode().splitlines()):
            chunk = await proc.stdout.receive_some()
            assert chunk, buffer.decode()
            buffer += chunk
    return buffer.decode().splitlines()


async def test_kittiwake_sessions_watch_prints_each_event_once(tmp_path: Path) -> None:
    env = {**os.environ, "KITTIWAKE_SERVER_PASSWORD": ""}
    async with served(tmp_path) as g, sdk.AsyncClient(g.url) as client:
        first, second = [(await client.session_create()).id for _ in range(2)]
        await client.session_prompt(first, prompt=sdk.Prompt(text="one"))
        await client.session_wait(first)

        async def expected(sid: str) -> list[str]:
            events = (await client.session_history(sid, limit=1000))["data"]
            return [f"{sid} {e['durable']['seq']} {e['type']}" for e in events]

        with pytest.raises(sdk.SessionNotFoundError):  # the watcher's own, raised at once
            async with sdk.Watcher(g.url, ["ses_missing"]).open() as refused:
                async for _ in refused:
                    raise AssertionError("no event of an unknown session")

        command = [sys.executable, "-m", "gateway", "sessions", "watch", "--attach", g.url]
        proc = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, env=env)
        try:
            out = bytearray()
            want = await expected(first)
            lines = await _lines_until(proc, out, lambda got: len(got) >= len(want))
            assert lines == want  # replayed from seq 1
            await client.session_prompt(second, prompt=sdk.Prompt(text="two"))
            await client.session_wait(second)
            want += await expected(second)
            lines = await _lines_until(proc, out, lambda got: len(got) >= len(want))
            assert sorted(lines) == sorted(want)  # the live ones, each once
        finally:
            proc.terminate()
            await proc.wait()

        missing = await trio.run_process(
            [*command[:5], "ses_missing", *command[5:]], capture_stdout=True,
            capture_stderr=True, check=False, env=env,
        )  # fmt: skip
        assert missing.returncode == 1
        assert b"SessionNotFoundError" in missing.stderr
