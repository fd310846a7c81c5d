"""Many seeds: run them in worker processes, count what they injected and checked, and
shrink a failing seed's workload to a minimal one that still fails."""

from __future__ import annotations

import logging
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TextIO

import msgspec

from sims._faults import ALL_FAULTS
from sims._invariants import CHECKS
from sims._sim import Result, run_seed
from sims._workload import Features, Workload

__all__ = ["HANG_SECONDS", "Summary", "expand_faults", "run_many", "shrink", "summary_table"]

HANG_SECONDS = 300  # wall-clock seconds without a finished seed before the run counts as hung


class Summary(msgspec.Struct, kw_only=True):
    """What a set of seeds did, added up."""

    seeds: int = 0
    sessions: int = 0
    crashes: int = 0
    compactions: int = 0
    seconds: float = 0.0
    simulated_seconds: float = 0.0
    injected: dict[str, int] = {}
    seeds_with: dict[str, int] = {}
    checks: dict[str, int] = {}
    violations: dict[str, int] = {}
    failing: list[int] = []
    hung: list[int] = []

    def add(self, result: Result) -> None:
        self.seeds += 1
        self.sessions += result.sessions
        self.crashes += result.crashes
        self.compactions += result.compactions
        self.simulated_seconds += result.simulated_seconds
        for kind, count in result.injected.items():
            self.injected[kind] = self.injected.get(kind, 0) + count
            self.seeds_with[kind] = self.seeds_with.get(kind, 0) + 1
        for name, count in result.checks.items():
            self.checks[name] = self.checks.get(name, 0) + count
        broken = Counter(v.split(":", 1)[0] for v in result.violations)
        for name, count in broken.items():
            self.violations[name] = self.violations.get(name, 0) + count
        if result.violations:
            self.failing.append(result.seed)


def expand_faults(spec: str | None) -> tuple[str, ...]:
    """``provider,storage.crash`` -> the fault kinds named, groups expanded; all by default."""
    if not spec or spec == "all":
        return ALL_FAULTS
    if spec == "none":
        return ()
    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    chosen = [k for k in ALL_FAULTS if any(k == w or k.startswith(w + ".") for w in wanted)]
    unknown = [w for w in wanted if not any(k == w or k.startswith(w + ".") for k in ALL_FAULTS)]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(ALL_FAULTS)}")
    return tuple(chosen)


def _one(job: tuple[int, int, tuple[str, ...], tuple[int, int], Features]) -> Result:
    seed, sessions, faults, per_session, features = job
    logging.disable(logging.CRITICAL)
    result = run_seed(
        seed, sessions=sessions, faults=faults, per_session=per_session, trace=False,
        features=features,
    )  # fmt: skip
    return msgspec.structs.replace(result, trace=[])


def run_many(
    seeds: Iterable[int], *, sessions: int, faults: tuple[str, ...], workers: int = 1,
    per_session: tuple[int, int] = (3, 9), on_result: Callable[[Result], None] | None = None,
    features: Features = Features(),
) -> Summary:  # fmt: skip
    """Run every seed (in *workers* processes when more than one); add up their results."""
    summary = Summary()
    started = time.perf_counter()
    jobs = [(seed, sessions, faults, per_session, features) for seed in seeds]
    if workers > 1:
        context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        with context.Pool(workers, maxtasksperchild=200) as pool:
            pending = pool.imap(_one, jobs, chunksize=1)
            done: set[int] = set()
            for _ in jobs:
                try:
                    result = pending.next(timeout=HANG_SECONDS)
                except multiprocessing.TimeoutError:
                    # A seed that blocks the trio thread never ends; name those in flight.
                    hung = sorted({job[0] for job in jobs} - done)[:workers]
                    summary.hung = hung
                    summary.failing.extend(hung)
                    pool.terminate()
                    break
                done.add(result.seed)
                summary.add(result)
                if on_result is not None:
                    on_result(result)
    else:
        for job in jobs:
            result = _one(job)
            summary.add(result)
            if on_result is not None:
                on_result(result)
    summary.failing.sort()
    summary.seconds = time.perf_counter() - started
    return summary


def summary_table(summary: Summary, out: TextIO, replay: str = "") -> None:
    """The faults injected and the invariants checked, as two plain-text tables."""
    rate = summary.seeds / summary.seconds if summary.seconds else 0.0
    out.write(
        f"\n{summary.seeds} seeds, {summary.sessions} sessions, {summary.crashes} simulated "
        f"crashes, {summary.compactions} compactions in {summary.seconds:.1f} s ({rate:.1f} seeds/s, "
        f"{summary.sessions / summary.seconds if summary.seconds else 0:.1f} sessions/s; "
        f"{summary.simulated_seconds:.0f} simulated seconds)\n\n"
    )
    out.write(f"{'fault':<22}{'seeds':>8}{'injected':>10}\n")
    for kind in ALL_FAULTS:
        seeds, count = summary.seeds_with.get(kind, 0), summary.injected.get(kind, 0)
        out.write(f"{kind:<22}{seeds:>8}{count:>10}\n")
    out.write(f"\n{'invariant':<34}{'checks':>10}{'violations':>12}\n")
    for name in CHECKS:
        checks, broken = summary.checks.get(name, 0), summary.violations.get(name, 0)
        out.write(f"{name:<34}{checks:>10}{broken:>12}\n")
    if summary.hung:
        out.write(f"\nHUNG (the run stopped): seeds {summary.hung} were running\n")
    if summary.failing:
        shown = " ".join(str(s) for s in summary.failing[:20])
        out.write(f"\nFAILING seeds: {shown}\n  replay: python -m sims replay SEED{replay}\n")
    else:
        out.write("\nno invariant violated\n")


def shrink(
    seed: int, workload: Workload, fails: Callable[[Workload], bool],
    log: Callable[[str], None] = lambda _: None,
) -> Workload:  # fmt: skip
    """A smaller workload for which *fails* still holds: drop chunks of actions (halves,
    then quarters, ... down to single actions), then drop unused sessions."""
    current = workload
    chunk = max(1, len(current.actions) // 2)
    while chunk >= 1:
        index, progressed = 0, False
        while index < len(current.actions):
            actions = current.actions[:index] + current.actions[index + chunk :]
            candidate = Workload(sessions=current.sessions, actions=actions)
            if actions != current.actions and fails(candidate):
                current, progressed = candidate, True
                log(f"seed {seed}: {len(current.actions)} actions still fail")
            else:
                index += chunk
        if not progressed:
            chunk //= 2
    used = sorted({a.session for a in current.actions if a.session >= 0})
    while current.sessions > 1 and (current.sessions - 1) not in used:
        candidate = Workload(sessions=current.sessions - 1, actions=current.actions)
        if not fails(candidate):
            break
        current = candidate
    return current
