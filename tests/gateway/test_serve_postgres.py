"""``kittiwake serve --store postgresql://...`` in real subprocesses: a prompt answered
over HTTP by a local provider, the server stopped and started again, the history intact;
and a server that cannot be reached is one line."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import trio

from tests.gateway.test_cli_run import Cli, provider, said
from tests.llm.conftest import LocalServer
from tests.waiting import serving_url

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"


@asynccontextmanager
async def serving(cli: Cli, *args: str) -> AsyncIterator[str]:
    """``kittiwake serve`` until the block ends (SIGTERM); its URL."""
    server = await trio.lowlevel.open_process(
        cli.argv("serve", "--port", "0", *args), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cli.project, env=cli.env,
    )  # fmt: skip
    try:
        yield await serving_url(server)
    finally:
        server.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            await server.wait()
    assert server.returncode == 0


async def test_a_session_on_postgresql_is_answered_and_outlives_the_server(
    tmp_path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    provider.queue(said("first answer"))
    store = ("--store", postgres_database)
    async with serving(cli, *store) as url, httpx.AsyncClient(base_url=url) as client:
        sid = (await client.post(S, json={"model": {"id": "m1", "providerID": "local"}})).json()[
            "data"
        ]["id"]
        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "hello"}})
        assert r.status_code == 200, r.text
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        before = (await client.get(f"{S}/{sid}/context")).json()["data"]
    assert [m["type"] for m in before] == ["user", "assistant"]
    assert before[1]["content"][0]["text"] == "first answer"
    assert not (cli.data / "kittiwake.duckdb").exists()  # the sessions are in PostgreSQL
    provider.queue(said("second answer"))
    async with serving(cli, *store) as url, httpx.AsyncClient(base_url=url) as client:
        assert [s["id"] for s in (await client.get(S)).json()["data"]] == [sid]
        assert (await client.get(f"{S}/{sid}/context")).json()["data"] == before
        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "again"}})
        assert r.status_code == 200, r.text
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        after = (await client.get(f"{S}/{sid}/context")).json()["data"]
    assert after[:2] == before
    assert [m["type"] for m in after[2:]] == ["user", "assistant"]
    assert after[3]["content"][0]["text"] == "second answer"
    # The second turn was sent the whole conversation, read back from PostgreSQL.
    sent = [m for m in provider.requests[-1].json()["messages"] if m["role"] != "system"]
    assert [m["content"] for m in sent] == ["hello", "first answer", "again"]


async def test_an_unreachable_store_is_one_line(tmp_path, provider: LocalServer) -> None:
    cli = Cli(tmp_path, provider)
    missing = f"postgresql://nobody@/none?host={tmp_path}/no-socket"
    done = await cli("serve", "--port", "0", "--store", missing)
    assert done.returncode == 1
    last = done.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("kittiwake: PostgreSQL store did not open: ") and "no-socket" in last
    assert "Traceback" not in done.stderr.decode()
