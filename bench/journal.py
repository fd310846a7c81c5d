"""Journal appends per second with fdatasync, for batches of 1 and 64 payloads of 300 bytes.

Usage: .venv/bin/python bench/journal.py [--dir DIR] [--seconds S] [--runs N]
Prints the median of N runs for each batch size (batches/s and records/s).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from storage import Journal

PAYLOAD_BYTES = 300
BATCH_SIZES = (1, 64)


def one_run(directory: Path, batch_size: int, seconds: float) -> float:
    """Append batches for *seconds* into a fresh journal; return batches per second."""
    batch = [bytes([i % 256]) * PAYLOAD_BYTES for i in range(batch_size)]
    with Journal.open(directory, fsync=True) as journal:
        appends = 0
        started = time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            journal.append(batch)
            appends += 1
        assert journal.statistics().fsyncs == appends
    return appends / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="parent of the run directories")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for batch_size in BATCH_SIZES:
        rates = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(dir=args.dir) as name:
                rates.append(one_run(Path(name), batch_size, args.seconds))
        median = statistics.median(rates)
        print(
            f"batch={batch_size:<3} payload={PAYLOAD_BYTES}B fdatasync: "
            f"median {median:,.0f} appends/s, {median * batch_size:,.0f} records/s "
            f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})"
        )


if __name__ == "__main__":
    main()
