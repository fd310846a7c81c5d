"""A session's lease parked across idle gaps (``serve --store --lease-idle``), in real
``kittiwake serve --store`` processes with the local provider: a busy session's prompts
are driven under one token (each admitted, its lease taken back and promoted in one
transaction, its turn written and the lease parked in another) and its lease is free
once the idle time has passed; a prompt
sent through another worker to a session parked elsewhere is answered at once (that
worker acquires the parked lease), also when the holder was killed with it parked (well
within the lease TTL); a worker whose parked lease was acquired meanwhile
does not open its next admission under it (the prompt waits for the holder)."""

from __future__ import annotations

from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import msgspec
import psycopg
import trio

from storage import AcquireLease, PostgresStore, ReleaseLease
from tests.cluster.harness import Node, answer_each, last_user_text
from tests.cluster.test_workers import prompt_and_wait, texts
from tests.gateway.test_cli_run import Cli, provider
from tests.llm.conftest import LocalServer

__all__ = ["provider"]  # the fixture, imported for the tests here

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}


class LeaseRow(msgspec.Struct, frozen=True):
    owner: str
    token: int
    parked: bool
    released: bool
    left: float
    """Seconds from now until it expires, on PostgreSQL's clock."""


async def lease_row(url: str, session_id: str) -> LeaseRow:
    def query() -> LeaseRow:
        with psycopg.connect(url) as pg:
            row = pg.execute(
                "select owner, token, parked, released, "
                "extract(epoch from expires_at - now())::float8 from session_lease "
                "where session_id = %s",
                [session_id],
            ).fetchone()
        assert row is not None
        return LeaseRow(*row)

    return await trio.to_thread.run_sync(query)


async def pending(url: str, session_id: str) -> list[str]:
    """The session's unpromoted inbox rows, read from PostgreSQL."""

    def query() -> list[str]:
        with psycopg.connect(url) as pg:
            rows = pg.execute(
                "select prompt from session_input where session_id = %s "
                "and promoted_seq is null order by admitted_seq",
                [session_id],
            ).fetchall()
        return [msgspec.json.decode(r[0])["text"] for r in rows]

    return await trio.to_thread.run_sync(query)


async def transactions(url: str, session_id: str) -> list[tuple[str, int]]:
    """Each event of the session (its type without the version) and the PostgreSQL
    transaction that wrote it (``xmin``), in seq order."""

    def query() -> list[tuple[str, int]]:
        with psycopg.connect(url) as pg:
            rows = pg.execute(
                "select type, xmin::text::bigint from event where aggregate_id = %s order by seq",
                [session_id],
            ).fetchall()
        return [(str(t).rsplit(".", 1)[0], int(x)) for t, x in rows]

    return await trio.to_thread.run_sync(query)


async def lease_written(url: str, session_id: str) -> int:
    """The PostgreSQL transaction that last wrote the session's lease row (``xmin``)."""

    def query() -> int:
        with psycopg.connect(url) as pg:
            row = pg.execute(
                "select xmin::text::bigint from session_lease where session_id = %s",
                [session_id],
            ).fetchone()
        assert row is not None
        return int(row[0])

    return await trio.to_thread.run_sync(query)


def asked(provider: LocalServer) -> Counter[str]:
    """How many provider requests each prompt (the last user text) got."""
    return Counter(last_user_text(r) for r in provider.requests)


async def test_a_busy_sessions_lease_is_kept_across_idle_gaps_then_freed_after_the_idle_time(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    async with (
        Node.running(cli, postgres_database, "--lease-idle", "3", name="a") as a,
        httpx.AsyncClient(base_url=a.url, timeout=30) as client,
    ):
        sid = (await client.post(S, json={"model": MODEL})).json()["data"]["id"]
        await prompt_and_wait(client, sid, "one")
        first = await lease_row(postgres_database, sid)
        assert first.parked and not first.released and 0 < first.left <= 3
        # The next prompt inside the idle time is driven under the same token: taken back,
        # not acquired again (every acquisition is a new token).
        await prompt_and_wait(client, sid, "two")
        second = await lease_row(postgres_database, sid)
        assert (second.owner, second.token, second.parked) == (first.owner, first.token, True)
        # Its admission, the lease taken back and its promotion were one transaction, its
        # provider turn's events and the lease parked another.
        written = await transactions(postgres_database, sid)
        admitted = max(i for i, (kind, _) in enumerate(written) if kind.endswith("prompt.admitted"))
        kinds = [kind.removeprefix("session.next.") for kind, _ in written[admitted:]]
        assert kinds[:2] == ["prompt.admitted", "prompt.promoted"]
        assert kinds[2] == "step.started" and kinds[-1] == "step.ended"
        turn = {xid for _, xid in written[admitted + 2 :]}
        assert written[admitted][1] == written[admitted + 1][1] and len(turn) == 1
        assert written[admitted][1] not in turn
        assert await lease_written(postgres_database, sid) in turn  # parked by the turn
        # Past the idle time the lease is free (not live), and the next prompt acquires it.
        await trio.sleep(second.left + 0.05)  # PostgreSQL's clock: its expiry is the event
        assert (await lease_row(postgres_database, sid)).left < 0
        await prompt_and_wait(client, sid, "three")
        third = await lease_row(postgres_database, sid)
        assert (third.owner, third.token, third.parked) == (first.owner, first.token + 1, True)
        assert await texts(client, sid) == [
            "one",
            "re: one",
            "two",
            "re: two",
            "three",
            "re: three",
        ]
    assert asked(provider) == {"one": 1, "two": 1, "three": 1}


async def test_a_prompt_through_another_worker_to_a_session_parked_elsewhere_is_answered(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    idle = ("--lease-idle", "600")  # far longer than the test: parked throughout
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Node.running(cli, postgres_database, *idle, name="a"))
        b = await stack.enter_async_context(Node.running(cli, postgres_database, *idle, name="b"))
        ca = await stack.enter_async_context(httpx.AsyncClient(base_url=a.url, timeout=30))
        cb = await stack.enter_async_context(httpx.AsyncClient(base_url=b.url, timeout=30))
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        await prompt_and_wait(ca, sid, "one")
        parked = await lease_row(postgres_database, sid)
        assert parked.parked and parked.left > 60  # held idle by A
        with trio.fail_after(30):  # answered now, not once A's idle time is over
            await prompt_and_wait(cb, sid, "two")
            await prompt_and_wait(ca, sid, "three")
            await prompt_and_wait(cb, sid, "four")
        history = await texts(ca, sid)
    expected = [[text, f"re: {text}"] for text in ("one", "two", "three", "four")]
    assert history == [part for pair in expected for part in pair]
    assert asked(provider) == {"one": 1, "two": 1, "three": 1, "four": 1}


async def test_a_holder_killed_with_its_lease_parked_is_replaced_within_the_lease_ttl(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    """A dies (SIGKILL) holding the session's lease parked for 600 s, TTL 30 s: a prompt
    through B acquires the parked lease at once (token + 1) and is answered well within
    the TTL, neither after the idle time nor after an expiry."""
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    options = ("--lease-ttl", "30", "--lease-idle", "600")
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(
            Node.running(cli, postgres_database, *options, name="a")
        )
        b = await stack.enter_async_context(
            Node.running(cli, postgres_database, *options, name="b")
        )
        ca = await stack.enter_async_context(httpx.AsyncClient(base_url=a.url, timeout=60))
        cb = await stack.enter_async_context(httpx.AsyncClient(base_url=b.url, timeout=60))
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        await prompt_and_wait(ca, sid, "one")
        parked = await lease_row(postgres_database, sid)
        assert parked.parked and parked.left > 60  # held idle by A
        a.process.kill()
        await a.process.wait()
        started = trio.current_time()
        await prompt_and_wait(cb, sid, "two")
        assert trio.current_time() - started < 30  # within the TTL (far from the idle time)
        now = await lease_row(postgres_database, sid)
        history = await texts(cb, sid)
    assert now.owner != parked.owner and now.token == parked.token + 1
    assert history == ["one", "re: one", "two", "re: two"]
    assert asked(provider) == {"one": 1, "two": 1}


async def test_a_change_made_through_another_worker_reaches_the_parked_holders_next_turn(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    """A switches nothing itself: B switches the session's agent while A holds its lease
    parked; A's next turn (a prompt through A, opened under the parked lease) is the plan
    agent's, as B's would be."""
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    idle = ("--lease-idle", "600")  # far longer than the test: parked throughout
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Node.running(cli, postgres_database, *idle, name="a"))
        b = await stack.enter_async_context(Node.running(cli, postgres_database, *idle, name="b"))
        ca = await stack.enter_async_context(httpx.AsyncClient(base_url=a.url, timeout=30))
        cb = await stack.enter_async_context(httpx.AsyncClient(base_url=b.url, timeout=30))
        sid = (await ca.post(S, json={"model": MODEL})).json()["data"]["id"]
        await prompt_and_wait(ca, sid, "one")
        before = await lease_row(postgres_database, sid)
        r = await cb.post(f"{S}/{sid}/agent", json={"agent": "plan"})
        assert r.status_code == 204, r.text
        await prompt_and_wait(ca, sid, "two")
        parked = await lease_row(postgres_database, sid)
    systems = [
        " ".join(str(m["content"]) for m in r.json()["messages"] if m["role"] == "system")
        for r in provider.requests
    ]
    assert ["# Plan mode" in text for text in systems] == [False, True]
    assert parked.parked and (parked.owner, parked.token) == (before.owner, before.token)


async def test_a_worker_whose_parked_lease_was_acquired_does_not_open_a_prompt_under_it(
    tmp_path: Path, provider: LocalServer, postgres_database: str
) -> None:
    cli = Cli(tmp_path, provider)
    answer_each(provider)
    options = ("--lease-ttl", "1", "--lease-idle", "600")
    async with (
        Node.running(cli, postgres_database, *options, name="a") as a,
        httpx.AsyncClient(base_url=a.url, timeout=30) as client,
    ):
        sid = (await client.post(S, json={"model": MODEL})).json()["data"]["id"]
        await prompt_and_wait(client, sid, "one")
        # A sweep's wake read before the lease was first taken (every 0.5 s at this TTL)
        # may start one more drain once the wait has returned: it finds nothing to do and
        # parks the lease again. PostgreSQL's row is another process's state: looked at
        # again until parked.
        with trio.fail_after(10):
            while not (parked := await lease_row(postgres_database, sid)).parked:  # noqa: ASYNC110
                await trio.sleep(0.05)
        # Another owner acquires the parked lease; nothing tells A (no event is written).
        other = await trio.to_thread.run_sync(
            lambda: PostgresStore.open(postgres_database, directory=tmp_path, owner="other")
        )
        try:
            taken = other.write_batch([AcquireLease(session_id=sid, owner="other", ttl_ms=60_000)])[
                0
            ][0].value
            assert taken is not None and taken.token == parked.token + 1
            # A still takes itself for the holder: its admission is written, its opening
            # under the old token refused, so the prompt waits for the holder.
            r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "two"}})
            assert r.status_code == 200, r.text
            assert await pending(postgres_database, sid) == ["two"]
            assert (await lease_row(postgres_database, sid)).owner == "other"
            # Released, the lease is free: A's sweep finds the prompt and drives it.
            other.write_batch([ReleaseLease(session_id=sid, owner="other", token=taken.token)])
            with trio.fail_after(30):
                assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        finally:
            other.close()
        assert await texts(client, sid) == ["one", "re: one", "two", "re: two"]
    assert asked(provider) == {"one": 1, "two": 1}
