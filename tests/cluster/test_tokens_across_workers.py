"""Bearer tokens on a PostgreSQL cluster of real ``kittiwake serve --store --tokens``
processes: a token made through one worker works on the others, a revocation through one
is refused by the others within a second and closes their open streams, a token of
another project finds nothing there, and every worker lists the one audit trail."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest
import trio

from tests.cluster.harness import Node
from tests.gateway.test_cli_run import Cli

PW = ("kittiwake", "cluster-pw")
pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _stream_until_closed(client: httpx.AsyncClient, token: str, opened: trio.Event) -> None:
    async with client.stream("GET", "/api/event", headers=bearer(token)) as r:
        assert r.status_code == 200
        opened.set()
        async for _ in r.aiter_bytes():
            pass


async def test_a_token_through_one_worker_holds_and_is_revoked_on_all(
    tmp_path: Path, postgres_database: str
) -> None:
    cli = Cli(tmp_path, None)
    cli.env["KITTIWAKE_SERVER_PASSWORD"] = PW[1]
    async with AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(
                Node.running(cli, postgres_database, "--tokens", name=name)
            )
            for name in ("a", "b")
        ]
        a, b = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=n.url, timeout=30))
            for n in nodes
        ]
        made = await a.post(
            "/api/token", json={"user": "ann", "project": "*", "role": "write"}, auth=PW
        )
        token, token_id = made.json()["data"]["token"], made.json()["data"]["info"]["id"]
        other = await a.post(
            "/api/token", json={"user": "bob", "project": "prj_other", "role": "write"}, auth=PW
        )
        sid = (await b.post("/api/session", json={}, headers=bearer(token))).json()["data"]["id"]
        assert (await a.get(f"/api/session/{sid}", headers=bearer(token))).status_code == 200
        theirs = bearer(other.json()["data"]["token"])
        assert (await b.get(f"/api/session/{sid}", headers=theirs)).status_code == 404
        assert (await a.get(f"/api/session/{sid}/event", headers=theirs)).status_code == 404

        opened = trio.Event()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stream_until_closed, b, token, opened)
                await opened.wait()
                revoked = await a.delete(f"/api/token/{token_id}", auth=PW)
                assert revoked.status_code == 200
                started = time.monotonic()
                assert (await a.get("/api/session", headers=bearer(token))).status_code == 401
            closed_after = time.monotonic() - started  # b closed the token's open stream
        assert closed_after < 1.0, closed_after
        assert (await b.get("/api/session", headers=bearer(token))).status_code == 401

        audit = (await b.get("/api/audit", auth=PW)).json()["data"]
        actions = {(e["action"], e["status"]) for e in audit}
        assert ("POST /api/token", 201) in actions
        assert (f"DELETE /api/token/{token_id}", 200) in actions
        assert (f"GET /api/session/{sid}", 404) not in actions  # scope answers are not refusals
        assert ("GET /api/session", 401) in actions
