"""A cluster worker's runtime in this process (``open_runtime(store_url=..., cluster=...)``)
on a temporary PostgreSQL, with a scripted provider: a turn's last write parks the lease,
and a drain that follows in the same chain (a resume asked for during the turn) takes it
back under the same token before it writes, however short the idle time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from actors import ClusterOptions, Runtime
from runtime import Location, Prompt, open_runtime
from runtime.llm import LLMEvent, LLMRequest, ScriptedLLM
from storage import LeaseOf, PostgresStatistics, Statistics
from tests.gateway.conftest import answer


def _slow_answers() -> ScriptedLLM:
    def script(request: LLMRequest) -> Sequence[LLMEvent]:
        return answer(f"answer {len(request.messages)}")

    return ScriptedLLM(script, latency=0.3)  # the provider's own time: a resume lands in it


@pytest.mark.parametrize("idle", [60.0, 0.0])
async def test_a_drain_after_a_parking_write_takes_the_lease_back_under_its_token(
    tmp_path: Path, postgres_database: str, idle: float
) -> None:
    llm = _slow_answers()
    cluster = ClusterOptions(owner="w1", lease_idle=idle)
    async with open_runtime(
        data_dir=tmp_path / "data", llm=llm, store_url=postgres_database, cluster=cluster
    ) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(tmp_path)))).id
        await rt.sessions.prompt(sid, prompt=Prompt(text="one"))
        await rt.sessions.resume(sid, wait=False)  # during the turn: the chain's next drain
        with trio.fail_after(30):
            await rt.sessions.wait_idle(sid)
        lease = await rt.storage.read(LeaseOf(session_id=sid))
        messages = await rt.sessions.context(sid)
    assert len(llm.requests) == 2  # the prompt's turn, then the resume's
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "AssistantMessage",
    ]
    if idle:  # parked by the resume's last write, under the one token it was acquired with
        assert lease is not None and (lease.token, lease.parked) == (1, True)
    else:  # free at once, the resume having driven under a lease acquired again
        assert lease is None


async def _version_checks(rt: Runtime) -> int:
    stats = await rt.storage.read(Statistics())
    assert isinstance(stats, PostgresStatistics)
    return stats.version_checks


async def test_a_drain_an_admission_opened_reads_no_session_yet_sees_another_workers_switch(
    tmp_path: Path, postgres_database: str
) -> None:
    """Prompts to a session whose lease is parked here: each admission's batch takes the
    lease back, promotes and reads the session's info under its lock, so the drain it
    opens checks no session version of its own (before: one per prompt). An agent switch
    made through another worker in between still reaches the next turn."""
    llm = ScriptedLLM(lambda request: answer("ok"))
    options = {"lease_idle": 600.0, "sweep_every": 600.0}  # parked throughout, no sweep
    location = Location(directory=str(tmp_path))
    async with (
        open_runtime(
            data_dir=tmp_path / "a", llm=llm, store_url=postgres_database,
            cluster=ClusterOptions(owner="w1", **options),
        ) as a,
        open_runtime(
            data_dir=tmp_path / "b", llm=llm, store_url=postgres_database,
            cluster=ClusterOptions(owner="w2", **options),
        ) as b,
    ):  # fmt: skip
        sid = (await a.sessions.create(location=location)).id

        async def prompt(text: str) -> None:
            await a.sessions.prompt(sid, prompt=Prompt(text=text))
            with trio.fail_after(30):
                await a.sessions.wait_idle(sid)

        await prompt("one")  # acquires the lease, parks it
        before = await _version_checks(a)
        for n in range(5):
            await prompt(f"again {n}")
        checks = await _version_checks(a) - before
        await b.sessions.switch_agent(sid, "plan")
        await prompt("planned")
        lease = await a.storage.read(LeaseOf(session_id=sid))
    assert checks == 0
    plans = ["# Plan mode" in " ".join([*r.system, str(r.messages)]) for r in llm.requests]
    assert plans == [False] * 6 + [True]
    assert lease is not None and (lease.owner, lease.token, lease.parked) == ("w1", 1, True)
