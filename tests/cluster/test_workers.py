"""``kittiwake serve --store postgresql://... --workers N`` in real processes: the parent
binds once, its workers answer on that socket, a killed worker is restarted, SIGTERM stops
them all, and workers do not outlive a parent killed with SIGKILL."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import trio

from tests.cluster.harness import Workers, answer_each, exited
from tests.gateway.test_cli_run import Cli, provider
from tests.llm.conftest import LocalServer
from tests.waiting import eventually

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}


def gone(pid: int) -> bool:
    """Whether *pid* has exited (a zombie counts: it runs nothing)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


async def prompt_and_wait(client: httpx.AsyncClient, sid: str, text: str) -> None:
    r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": text}})
    assert r.status_code == 200, r.text
    assert (await client.post(f"{S}/{sid}/wait")).status_code == 204


async def texts(client: httpx.AsyncClient, sid: str) -> list[str]:
    context = (await client.get(f"{S}/{sid}/context")).json()["data"]
    return [m["text"] if m["type"] == "user" else m["content"][0]["text"] for m in context]


async def test_workers_serve_one_socket_a_killed_one_is_restarted_and_sigterm_stops_all(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    async with Workers.running(cli, postgres_database, 2) as cluster:
        first = cluster.worker_pids()
        assert len(first) == 2
        fresh = httpx.Limits(max_keepalive_connections=0)  # no connection to a killed worker
        async with httpx.AsyncClient(base_url=cluster.url, timeout=30, limits=fresh) as client:
            sid = (await client.post(S, json={"model": MODEL})).json()["data"]["id"]
            await prompt_and_wait(client, sid, "one")
            for pid in first:  # both: the next request can only be served by a restarted one
                os.kill(pid, signal.SIGKILL)
            await eventually(lambda: b"restarting" in cluster.stderr)
            assert b"exited with status -9" in cluster.stderr
            # The socket stayed bound and listening: the next request waits in its queue
            # for the restarted worker.
            await prompt_and_wait(client, sid, "two")
            assert await texts(client, sid) == ["one", "re: one", "two", "re: two"]
        await eventually(lambda: cluster.stderr.count(b"restarting") == 2)
        second = cluster.worker_pids()
        assert len(second) == 2 and not set(second) & set(first)
        await cluster.stop()
    assert cluster.process.returncode == 0
    assert all(gone(pid) for pid in second)
    assert b"stopping 2 workers (signal 15)" in cluster.stderr
    assert not (cli.data / "serving.json").exists()
    # Each worker slot keeps its own telemetry file; the data dir holds no store.
    for slot in ("0", "1"):
        assert (cli.data / "workers" / slot / "telemetry.duckdb").exists()
    assert not (cli.data / "kittiwake.duckdb").exists()


async def test_workers_stop_when_their_parent_is_killed(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    async with Workers.running(cli, postgres_database, 1) as cluster:
        pids = cluster.worker_pids()
        cluster.process.kill()
        await cluster.process.wait()
        with trio.fail_after(30):
            for pid in pids:
                await exited(pid)


async def test_workers_need_a_postgresql_store(tmp_path: Path) -> None:
    cli = Cli(tmp_path, None)
    done = await cli("serve", "--port", "0", "--workers", "2")
    assert done.returncode == 2
    assert done.stderr.decode().strip().splitlines()[-1] == (
        "kittiwake: --workers needs --store postgresql://...: the DuckDB store in a data dir "
        "is served by one process"
    )
    done = await cli("serve", "--port", "0", "--workers", "0")
    assert done.returncode == 2 and b"0 is not a number of workers" in done.stderr
