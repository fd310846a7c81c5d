"""``kittiwake serve --store postgresql://... --workers N`` in real processes: the parent
binds once, its workers answer on that socket with every serve option it was given, a
killed worker is restarted (also one killed before it served), SIGTERM stops them all,
workers do not outlive a parent killed with SIGKILL, and one exiting with an error before
serving stops the command."""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

import httpx
import psycopg
import trio

from gateway.cli._args import parser, worker_options
from tests.cluster.harness import Workers, answer_each, exited, read_until
from tests.gateway.test_cli_run import Cli, provider
from tests.llm.conftest import LocalServer
from tests.waiting import eventually

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}
HOLD = Path(__file__).parent / "hold"
"""A ``sitecustomize`` that holds one worker as it starts (see the file)."""


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


def test_a_worker_gets_every_serve_option_but_those_of_the_parent() -> None:
    given = [
        "--workers", "2", "--port", "0", "--hostname", "0.0.0.0", "--data-dir", "/d",
        "--store", "postgresql://u@h/db", "--lease-ttl", "1.5", "--lease-idle", "0.5",
        "--certfile", "c.pem",
        "--keyfile", "k.pem", "--directory", "/p",
    ]  # fmt: skip
    args = parser().parse_args(["serve", *given])
    each = ["--port", "4100", "--owner", "o", "--worker-slot", "1", "--listen-fd", "3"]
    each += ["--ready-fd", "4", "--lifeline-fd", "5"]
    worker = parser().parse_args(["serve", *worker_options(args), *each])
    # `open_browser` is `kittiwake web`'s (which refuses --workers), never a worker's.
    options = set(vars(parser().parse_args(["serve"]))) - {"command", "open_browser"}
    told = {"owner", "worker_slot", "listen_fd", "ready_fd", "lifeline_fd"}  # to each one
    passed = options - told - {"workers", "port"}
    # Every option a worker could get is given above (add a new one there), and each
    # reached it with the value the parent had.
    assert all(getattr(args, dest) is not None for dest in options - told)
    assert {dest: getattr(worker, dest) for dest in passed} == {
        dest: getattr(args, dest) for dest in passed
    }
    assert worker.workers is None and worker.lease_ttl == 1.5


async def lease_left(url: str, session_id: str) -> float:
    """Seconds from now until the session's lease (held, parked or released) expires."""

    def query() -> float:
        with psycopg.connect(url) as pg:
            row = pg.execute(
                "select extract(epoch from expires_at - now()) from session_lease "
                "where session_id = %s",
                [session_id],
            ).fetchone()
        assert row is not None
        return float(row[0])

    return await trio.to_thread.run_sync(query)


async def test_workers_get_the_lease_options_and_one_killed_before_serving_is_restarted(
    tmp_path: Path, provider: LocalServer, postgres_database: str, nursery: trio.Nursery
) -> None:
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    held: list[int] = []

    async def hold(stream: trio.SocketStream) -> None:
        # The first process of slot 1 is killed as it starts; its restart goes on.
        async with stream:
            pid = int(await read_until(stream, rb"(\d+)\n", bytearray()))
            held.append(pid)
            if len(held) == 1:
                os.kill(pid, signal.SIGKILL)
                await exited(pid)

    listeners = await nursery.start(partial(trio.serve_tcp, hold, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    path = os.pathsep.join([str(HOLD), *filter(None, [cli.env.get("PYTHONPATH")])])
    env = {**cli.env, "PYTHONPATH": path, "KITTIWAKE_TEST_HOLD": f"{port}:1"}
    options = ("--lease-ttl", "1", "--lease-idle", "0.5")
    async with Workers.running(cli, postgres_database, 2, *options, env=env) as cluster:
        assert len(held) == 2  # the killed one and its restart, which serves
        assert held[0] not in cluster.worker_pids() and held[1] in cluster.worker_pids()
        assert b"worker 1 (owner " in cluster.stderr
        assert b"exited with status -9 after" in cluster.stderr
        async with httpx.AsyncClient(base_url=cluster.url, timeout=30) as client:
            sid = (await client.post(S, json={"model": MODEL})).json()["data"]["id"]
            await prompt_and_wait(client, sid, "one")
            assert await texts(client, sid) == ["one", "re: one"]
        # Parked for half a second once idle, not the default five.
        assert await lease_left(postgres_database, sid) < 0.5
    assert cluster.process.returncode == 0


async def test_a_worker_exiting_with_an_error_before_serving_stops_the_command(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    cli.env["KITTIWAKE_MODEL"] = "local/no-such-model"  # read by each worker, not the parent
    done = await cli("serve", "--port", "0", "--store", postgres_database, "--workers", "2")
    assert done.returncode == 1, done.stderr.decode()
    last = done.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("kittiwake: worker ") and last.endswith(
        " exited with status 2 before serving; nothing is served"
    ), done.stderr.decode()
    assert b"restarting" not in done.stderr and b"serving http" not in done.stdout
