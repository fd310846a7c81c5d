"""What the telemetry tables cost a process that opens them: threads."""

from __future__ import annotations

import os
from pathlib import Path

from storage import TelemetryOptions, TelemetryStore


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_opening_the_tables_starts_only_their_writer_thread(tmp_path: Path) -> None:
    # DuckDB starts its asynchronous I/O pool (four threads per CPU) at connect unless told
    # otherwise; the telemetry file never needs it (the event store turns it off too).
    before = _threads()
    store = TelemetryStore.open(tmp_path, TelemetryOptions(flush_interval=0, sample=1.0))
    try:
        assert _threads() - before == 1  # the writer
        assert store.spans() == []
    finally:
        store.shutdown()
    assert _threads() == before
