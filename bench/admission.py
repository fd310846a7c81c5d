"""Durable prompt admissions per second through the embedded API (``resume=False``).

Usage: .venv/bin/python bench/admission.py [--dir DIR] [--seconds S] [--runs N] [--store URL]

Cases: one session with one caller, one session with 400 concurrent callers, and 100
sessions with 400 concurrent callers (4 per session); each with group commit (the
StorageActor's default batch of up to 1024 writes) and with one transaction per prompt
(``storage_max_batch=1``). Every admission is journaled (fdatasync) before its call
returns. Prints the median of N runs per case, each run in a fresh data dir. With
``--store postgresql://...`` the sessions are in that PostgreSQL database instead (every
admission committed there before its call returns); runs add sessions to it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import trio

from runtime import Location, Prompt, open_runtime

CASES: tuple[tuple[int, int], ...] = ((1, 1), (1, 400), (100, 400))  # (sessions, callers)
BATCHES: tuple[tuple[str, int], ...] = (("group commit", 1024), ("1 txn/prompt", 1))


async def one_run(
    directory: Path, sessions: int, callers: int, max_batch: int, seconds: float,
    store: str | None = None,
) -> tuple[float, float]:  # fmt: skip
    """Admit for *seconds*; return (admissions per second, mean prompts per storage batch)."""
    async with open_runtime(data_dir=directory, storage_max_batch=max_batch, store_url=store) as rt:
        loc = Location(directory=str(directory))
        sids = [(await rt.sessions.create(location=loc)).id for _ in range(sessions)]
        batches_before = rt.storage.batches
        admitted = 0
        deadline = 0.0

        async def caller(sid: str) -> None:
            nonlocal admitted
            n = 0
            while time.perf_counter() < deadline:
                n += 1
                await rt.sessions.prompt(sid, prompt=Prompt(text=f"prompt {n}"), resume=False)
                admitted += 1

        started = time.perf_counter()
        deadline = started + seconds
        async with trio.open_nursery() as nursery:
            for i in range(callers):
                nursery.start_soon(caller, sids[i % sessions])
        elapsed = time.perf_counter() - started
        batches = max(1, rt.storage.batches - batches_before)
    return admitted / elapsed, admitted / batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run directories")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--store", default=None, help="a PostgreSQL URL (default: DuckDB)")
    args = parser.parse_args()
    for label, max_batch in BATCHES:
        for sessions, callers in CASES:
            rates: list[float] = []
            sizes: list[float] = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory(dir=args.dir) as name:
                    rate, size = trio.run(
                        one_run,
                        Path(name),
                        sessions,
                        callers,
                        max_batch,
                        args.seconds,
                        args.store,
                    )
                rates.append(rate)
                sizes.append(size)
            print(
                f"{label:<13} sessions={sessions:<3} callers={callers:<3}: "
                f"median {statistics.median(rates):,.0f} admissions/s, "
                f"{statistics.median(sizes):,.1f} prompts/batch "
                f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})",
                flush=True,
            )


if __name__ == "__main__":
    main()
