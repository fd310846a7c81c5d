"""SIGKILL a real admitting process at random moments; nothing acknowledged may be lost."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import EventStore
from tests.cpu import CpuTime

WRITER = Path(__file__).with_name("kill_writer.py")
REPO = Path(__file__).resolve().parents[2]
SESSIONS = 3


def _acknowledged(out: Path) -> tuple[bool, list[tuple[str, str]]]:
    """(whether the writer got ready, the receipts it printed on complete lines)."""
    text = out.read_text()
    lines = text.split("\n")[:-1]  # the last element is a partial line or ""
    ready = "ready" in lines
    return ready, [tuple(line.split(" ")) for line in lines if line != "ready"]  # type: ignore[misc]


def _run_and_kill(data: Path, out: Path, lifetime: float, *, early: bool) -> None:
    """Start the writer and SIGKILL it *lifetime* s after it got ready (or after start)."""
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(data), str(SESSIONS)],
            stdout=sink, stderr=subprocess.DEVNULL, cwd=REPO,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while not early and "ready" not in out.read_text():
            assert proc.poll() is None, "writer exited before it got ready"
            assert time.monotonic() < deadline, "writer never got ready"
            time.sleep(0.005)
        time.sleep(lifetime)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


# Real processes started and killed 24 times: about 40 s, over a minute at a load of 12;
# the timeout only guards against a hang.
@pytest.mark.timeout(600)
def test_sigkill_loses_no_acknowledged_prompt(
    tmp_path: Path, contiguous: Callable[[EventStore], dict[str, int]]
) -> None:
    rng = random.Random(0x6B1D)
    data = tmp_path / "data"
    acknowledged: dict[str, str] = {}
    cpu = CpuTime()
    kills = 0
    while kills < 24:
        out = tmp_path / f"out{kills}.txt"
        # every fourth kill lands during start-up and recovery, the others while admitting
        early = kills % 4 == 3
        _run_and_kill(data, out, rng.uniform(0.05, 0.4), early=early)
        kills += 1
        ready, receipts = _acknowledged(out)
        assert ready or early
        for sid, mid in receipts:
            assert acknowledged.setdefault(mid, sid) == sid
        store = EventStore.open(data)
        try:
            counts = contiguous(store)
            rows = store.conn.execute("select id, session_id from session_input").fetchall()
            per_id = Counter(r[0] for r in rows)
            stored = dict(rows)
            for mid, sid in acknowledged.items():
                assert per_id[mid] == 1, (kills, mid)
                assert stored[mid] == sid
            admitted = Counter(
                r[0]
                for r in store.conn.execute(
                    "select data->>'messageID' from event "
                    "where type like 'session.next.prompt.admitted%'"
                ).fetchall()
            )
            assert admitted == per_id
            assert set(counts) == {f"ses_kill{i}" for i in range(SESSIONS)}
        finally:
            store.close()
    assert len(acknowledged) > 100
    # The kill loop's cost (about 20 CPU s), in CPU time: wall time depends on the load.
    assert cpu.spent() < 60
