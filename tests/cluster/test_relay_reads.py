"""Two cluster workers' runtimes in this process on one temporary PostgreSQL: a worker
whose session actor is still active but no longer drives reads nothing of the other
worker's commits of that session, until something there follows the session."""

from __future__ import annotations

from pathlib import Path

import trio

from actors import ClusterOptions, Runtime
from runtime import Location, Prompt, open_runtime
from runtime import events as ev
from runtime.llm import ScriptedLLM
from storage import EventsTail, PostgresStatistics, Statistics, StoredEvent
from tests.gateway.conftest import answer

_ADMITTED = ev.PromptAdmitted.__struct_config__.tag
_ENDED = ev.StepEnded.__struct_config__.tag
_SETTLE = 1.0
"""Seconds given to the relay after the last prompt: a notification of each prompt's
commits reaches the other worker well within it."""


async def _version_checks(rt: Runtime) -> int:
    stats = await rt.storage.read(Statistics())
    assert isinstance(stats, PostgresStatistics)
    return stats.version_checks


async def _prompt(rt: Runtime, sid: str, text: str) -> None:
    await rt.sessions.prompt(sid, prompt=Prompt(text=text))
    with trio.fail_after(30):
        await rt.sessions.wait_idle(sid)


async def test_a_worker_that_does_not_drive_reads_nothing_of_a_session_no_one_follows_there(
    tmp_path: Path, postgres_database: str
) -> None:
    """Worker b drove the session's first prompt and freed its lease (idle time 0), then
    a acquired it: b's actor stays active (idle retirement is minutes away) yet b makes
    no read (no version check, so no row read either) of a's five prompts; before, two
    per prompt. Once b follows the session (a subscriber of its hub, as an SSE or
    websocket stream is), a's next prompt's events reach it, all of them."""
    llm = ScriptedLLM(lambda request: answer("ok"))
    sweep = 600.0  # no sweep once started
    location = Location(directory=str(tmp_path))
    async with (
        open_runtime(
            data_dir=tmp_path / "a", llm=llm, store_url=postgres_database,
            cluster=ClusterOptions(owner="w1", lease_idle=600.0, sweep_every=sweep),
        ) as a,
        open_runtime(
            data_dir=tmp_path / "b", llm=llm, store_url=postgres_database,
            cluster=ClusterOptions(owner="w2", lease_idle=0.0, sweep_every=sweep),
        ) as b,
    ):  # fmt: skip
        sid = (await a.sessions.create(location=location)).id
        await _prompt(b, sid, "on b")  # b drives, then frees the lease
        await _prompt(a, sid, "on a")  # a acquires it and keeps it parked
        actor = b.execution.active(sid)
        assert actor is not None and not actor.driving
        before = await _version_checks(b)
        for n in range(5):
            await _prompt(a, sid, f"again {n}")
        await trio.sleep(_SETTLE)
        checks = await _version_checks(b) - before
        still_active = b.execution.active(sid) is not None
        with b.hub.subscribe(sid) as sub:
            await _prompt(a, sid, "followed")
            relayed: list[StoredEvent] = []
            with trio.fail_after(30):
                while not relayed or relayed[-1].type != _ENDED:
                    item = await sub.receive()
                    if isinstance(item, StoredEvent):
                        relayed.append(item)
        durable, _ = await a.storage.read(EventsTail(session_id=sid, after=0, limit=1000))
    assert still_active
    assert checks == 0
    assert relayed[0].type == _ADMITTED  # the followed prompt's events, all of them
    assert [e.seq for e in relayed] == [e.seq for e in durable][-len(relayed) :]
