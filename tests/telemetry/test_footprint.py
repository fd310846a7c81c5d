"""What the telemetry tables cost a process that opens them: threads."""

from __future__ import annotations

import os
from pathlib import Path

from storage import TelemetryOptions, TelemetryStore


def _threads() -> set[str]:
    """The process's threads by id (other tests' idle worker threads may come and go
    meanwhile, so the test compares which threads are new, not how many there are)."""
    return set(os.listdir("/proc/self/task"))


def test_opening_the_tables_starts_only_their_writer_thread(tmp_path: Path) -> None:
    # DuckDB starts its asynchronous I/O pool (four threads per CPU) at connect unless told
    # otherwise; the telemetry file never needs it (the event store turns it off too).
    before = _threads()
    store = TelemetryStore.open(tmp_path, TelemetryOptions(flush_interval=0, sample=1.0))
    try:
        started = _threads() - before
        assert len(started) == 1, started  # the writer
        assert store.spans() == []
    finally:
        store.shutdown()
    assert not started & _threads()  # the writer has ended
