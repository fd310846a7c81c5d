"""The HTTP torture against one ``kittiwake serve`` (DuckDB), SIGKILLed at random moments and
restarted on the same port and data dir while clients prompt and interrupt four sessions
over new connections; some answers are slow (cut by a kill or an interrupt), some refused
(the run fails). Followers read every session's SSE stream and one websocket across the
restarts. Afterwards every session's durable seqs are 1..n, contiguous, in its history and
on each live stream, whatever took them: titles, recovery's resume markers, failed runs,
interrupts."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path

import httpx
import trio

from tests.cluster.harness import (
    STREAMS_LEFT,
    Node,
    Seen,
    history,
    last_user_text,
    titled,
    titled_sessions,
    torture_answers,
)
from tests.cpu import CpuTime
from tests.gateway.test_cli_run import Cli, provider
from tests.llm.conftest import LocalServer, Recorded
from tests.waiting import eventually

__all__ = ["provider"]  # the fixture, imported for the tests here
pytestmark = STREAMS_LEFT  # requests and streams cut by kills

S = "/api/session"
MODEL = {"id": "m1", "providerID": "local"}
SESSIONS = 4
KILLS = 3
PAUSE = 0.05
"""Seconds a client waits before trying again while the server is down."""
TURNS_BEFORE_A_KILL = 4
"""Provider requests each start of the server sees before it is killed."""


def _refused(request: Recorded) -> bool:
    """A prompt the provider refuses (``fail``, see ``torture_answers``)."""
    return "fail" in last_user_text(request).split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until_served(client: httpx.AsyncClient, method: str, path: str, **kw: object) -> int:
    """Send the request until a server answers it (it may be down, being restarted); its
    status. Nothing is read from an answer: a request cut by a kill is not acknowledged."""
    while True:
        try:
            return (await client.request(method, path, **kw)).status_code  # type: ignore[arg-type]
        except httpx.TransportError:
            await trio.sleep(PAUSE)


async def test_sigkill_loop_against_one_server_keeps_every_sessions_seqs_contiguous(
    tmp_path: Path, provider: LocalServer
) -> None:
    cli = Cli(tmp_path, provider)
    titled(cli)
    torture_answers(provider)
    rng = random.Random(0x5E95)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    started, cpu = time.monotonic(), CpuTime()
    fresh = httpx.Limits(max_keepalive_connections=0)  # every request a new connection
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=fresh) as client:

        async def prompt_and_interrupt(sid: str, rng: random.Random) -> None:
            n = 0
            while True:
                n += 1
                word = rng.choice(["slow", "slow", "fail", "plain"])
                body = {"prompt": {"text": f"{word} {n}"}}
                if await _until_served(client, "POST", f"{S}/{sid}/prompt", json=body) != 200:
                    await trio.sleep(PAUSE)
                if rng.random() < 0.3:
                    await _until_served(client, "POST", f"{S}/{sid}/interrupt")
                await _until_served(client, "POST", f"{S}/{sid}/wait")

        async with trio.open_nursery() as followers:
            async with trio.open_nursery() as clients:
                for kill in range(KILLS):
                    async with Node.running(cli, None, name="one", port=port) as node:
                        if kill == 0:
                            sids = await titled_sessions(client, SESSIONS, MODEL)
                            seen = Seen(url, sids)
                            await seen.follow(followers)
                            for sid in sids:
                                clients.start_soon(
                                    prompt_and_interrupt, sid, random.Random(rng.random())
                                )
                        # Work under way before each kill, however slow the machine: turns
                        # asked of the provider since this start, and (before the last
                        # kill) a refused one, whose failure the kinds below must hold.
                        enough = len(provider.requests) + TURNS_BEFORE_A_KILL
                        await eventually(
                            lambda enough=enough: len(provider.requests) >= enough, within=60
                        )
                        if kill == KILLS - 1:
                            await eventually(lambda: any(_refused(r) for r in provider.requests),
                                             within=60)  # fmt: skip
                        await trio.sleep(rng.uniform(0.5, 1.2))
                        node.process.kill()
                        await node.process.wait()
                clients.cancel_scope.cancel()  # the clients stop where they are
            async with Node.running(cli, None, name="one", port=port):
                last: dict[str, int] = {}
                kinds: set[str] = set()
                for sid in sids:  # a last prompt takes every session on from where it is
                    body = {"prompt": {"text": f"last {sid}"}}
                    assert (await client.post(f"{S}/{sid}/prompt", json=body)).is_success
                    with trio.fail_after(30):
                        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
                    events = await history(client, sid, limit=50)
                    seqs = [e["durable"]["seq"] for e in events]
                    assert seqs == list(range(1, len(seqs) + 1)), (sid, seqs)
                    last[sid] = seqs[-1]
                    kinds |= {e["type"] for e in events}
                # The followers reconnect after the last restart, with their backoff, and
                # catch up by seq: slow on a loaded machine, so longer than the default.
                await eventually(lambda: seen.reached(last), within=60)
                followers.cancel_scope.cancel()
    assert seen.broken == []
    for sid, n in last.items():
        assert seen.sse[sid] == seen.ws[sid] == list(range(1, n + 1)), sid
    # What used to take a seq and stay out of the history and streams is in both now.
    assert {
        "session.updated", "session.resume.needed", "session.run.failed",
        "session.next.interrupt.requested", "session.next.step.failed",
    } <= kinds  # fmt: skip
    elapsed = time.monotonic() - started
    print(f"serve torture: {KILLS} kills, {max(last.values())} events at most, {elapsed:.1f} s")
    assert cpu.spent() < 60
