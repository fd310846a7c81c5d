"""What one verified backup costs, by database size.

Usage: .venv/bin/python bench/backup.py [--dir DIR] [--runs N] [--prompts N ...]

For each size, fills a fresh store with that many admitted prompts (1 KiB of text each,
in batches of 64), then times N backups (each after one more batch, so each has a
journal record to release): checkpoint, copy, fsync, read-only verification, rename,
journal release. Prints the database size and the median and slowest backup.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from runtime import Prompt
from runtime import events as ev
from storage import DB_FILE, AdmitPrompt, EventStore, WriteBatch

TEXT = "x" * 1024
BATCH = 64


def _info(session_id: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=session_id, project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


def _create(session_id: str, batch: WriteBatch) -> object:
    return batch.create_session(_info(session_id))


def _admit(store: EventStore, first: int, count: int) -> None:
    store.write_batch(
        [
            AdmitPrompt(
                session_id=f"ses_{n % 16}",
                message_id=f"msg_{n:09d}",
                prompt=Prompt(text=TEXT),
                delivery="queue",
                timestamp=n,
                fresh=True,
            )
            for n in range(first, first + count)
        ]
    )


def one_size(directory: Path, prompts: int, runs: int) -> tuple[int, list[float]]:
    store = EventStore.open(directory, backup_every=10**9, backup_journal_bytes=1 << 40)
    try:
        store.write_batch([partial(_create, f"ses_{i}") for i in range(16)])
        for first in range(0, prompts, BATCH):
            _admit(store, first, min(BATCH, prompts - first))
        times = []
        for run in range(runs):
            _admit(store, prompts + run, 1)
            started = time.perf_counter()
            store.checkpoint_and_backup()
            times.append(time.perf_counter() - started)
        return (directory / DB_FILE).stat().st_size, times
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run directories")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--prompts", type=int, nargs="+", default=[0, 10_000, 100_000])
    args = parser.parse_args()
    for prompts in args.prompts:
        with tempfile.TemporaryDirectory(dir=args.dir) as name:
            size, times = one_size(Path(name), prompts, args.runs)
        print(
            f"prompts={prompts:<7} database {size / 2**20:6.1f} MiB: backup median "
            f"{statistics.median(times) * 1000:7.1f} ms, slowest {max(times) * 1000:7.1f} ms"
        )


if __name__ == "__main__":
    main()
