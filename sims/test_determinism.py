"""One seed, one run: the simulated event log is identical when replayed."""

from __future__ import annotations

import shutil
from pathlib import Path

from sims.harness import simulate


def _twice(seed_a: int, seed_b: int, where: Path) -> tuple[list, list]:  # type: ignore[type-arg]
    first = simulate(seed_a, where)
    shutil.rmtree(where)
    return first, simulate(seed_b, where)


def test_the_same_seed_gives_the_same_event_log_twice(tmp_path: Path) -> None:
    first, second = _twice(7, 7, tmp_path / "run")
    assert len(first) > 100
    assert first == second
    kinds = {data.split('"type":"')[1].split('"')[0] for _, _, data in first}
    expected = {
        "session.next.tool.success",
        "session.next.prompt.promoted",
        "session.next.context.updated",
    }
    assert expected <= kinds


def test_a_different_seed_changes_the_run(tmp_path: Path) -> None:
    first, second = _twice(7, 8, tmp_path / "run")
    assert first != second
