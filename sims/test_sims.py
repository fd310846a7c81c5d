"""The simulator: one seed replays one run byte for byte, the CI seed set injects every
fault kind and breaks no invariant, and each checker catches a deliberately broken runtime.
"""

from __future__ import annotations

import logging
import time

import msgspec
import pytest

from sims._faults import ALL_FAULTS
from sims._invariants import CHECKS
from sims._planted import EXPECTED, planted
from sims._runner import run_many
from sims._sim import run_seed

# The CI set: 1,000 seeds of one session each with 1-2 client actions (the default of
# `python -m sims run` is 50 sessions of 3-9 actions), in 2 worker processes: about 65 s
# on two idle cores (docs/benchmarks.md).
CI_SEEDS = 1000
CI_SESSIONS = 1
CI_ACTIONS = (1, 2)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def test_the_same_seed_gives_a_byte_identical_trace_and_another_seed_does_not() -> None:
    first = run_seed(11, sessions=4)
    second = run_seed(11, sessions=4)
    other = run_seed(12, sessions=4)
    encode = msgspec.json.encode
    assert len(first.trace) > 50
    assert encode(first.trace) == encode(second.trace)
    assert encode(first) == encode(second)
    assert first.trace != other.trace


@pytest.mark.timeout(600)
def test_the_ci_seed_set_injects_every_fault_and_breaks_no_invariant() -> None:
    started = time.perf_counter()
    summary = run_many(
        range(CI_SEEDS), sessions=CI_SESSIONS, faults=ALL_FAULTS, workers=2,
        per_session=CI_ACTIONS,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    print(f"{CI_SEEDS} seeds in {elapsed:.1f} s ({CI_SEEDS / elapsed:.1f} seeds/s)")
    assert summary.seeds == CI_SEEDS
    assert summary.failing == [], summary.violations
    never = [kind for kind in ALL_FAULTS if not summary.seeds_with.get(kind)]
    assert never == []
    unchecked = [name for name in CHECKS if not summary.checks.get(name)]
    assert unchecked == []


# Seeds that show each plant quickly (found with `python -m sims run --plant NAME`);
# the test still searches onwards if a change of the simulator moves them.
_PLANT_SEARCH = {
    "promote-twice": ("all", range(0, 20)),
    "drop-admission": ("all", range(0, 20)),
    "rerun-tool": ("storage.crash,storage.torn", range(0, 60)),
    "skip-seq": ("all", range(0, 20)),
    "default-answers": ("none", range(0, 20)),
    "drop-late-answer": ("storage.crash", range(0, 60)),
}


@pytest.mark.parametrize("plant", sorted(EXPECTED))
def test_each_checker_catches_its_planted_bug_with_a_replayable_seed(plant: str) -> None:
    from sims._runner import expand_faults

    spec, seeds = _PLANT_SEARCH[plant]
    faults = expand_faults(spec)
    wanted = EXPECTED[plant]
    with planted(plant):
        found = None
        for seed in seeds:
            result = run_seed(seed, sessions=3, faults=faults, trace=False)
            if any(v.startswith(wanted + ":") for v in result.violations):
                found = seed, result
                break
        assert found is not None, f"no seed caught {plant}"
        seed, result = found
        again = run_seed(seed, sessions=3, faults=faults, trace=False)
    assert again.violations == result.violations  # the seed replays the failure
    # Without the plant, the same seed is clean.
    assert run_seed(seed, sessions=3, faults=faults, trace=False).violations == []


def test_shrinking_keeps_the_failure_with_fewer_actions() -> None:
    from sims._runner import shrink
    from sims._sim import seed_workload

    workload = seed_workload(0, 3)
    with planted("skip-seq"):

        def fails(candidate: object) -> bool:
            result = run_seed(0, workload=candidate, trace=False)  # type: ignore[arg-type]
            return any(v.startswith("events.contiguous_seqs:") for v in result.violations)

        assert fails(workload)
        small = shrink(0, workload, fails)
        assert len(small.actions) < len(workload.actions) // 2
        assert fails(small)
