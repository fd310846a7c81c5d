"""The Context Epoch store: verbatim baselines, revision checks, clearing on a Location move."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import events as ev
from storage import EpochConflictError, EpochRow, EventStore

SID = "ses_epoch"


def _open(path: Path) -> EventStore:
    store = EventStore.open(path)
    info = ev.SessionInfo(
        id=SID, project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip
    _ok(store.write_batch([lambda b: b.create_session(info)]))
    return store


def _ok(result: tuple[list, list]) -> list:  # type: ignore[type-arg]
    outcomes, _ = result
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    return [o.value for o in outcomes]


def _row(revision: int, baseline: str = "Base\u00e9 \n\n text") -> EpochRow:
    return EpochRow(SID, baseline, '{"core/date":{"value":"x"}}', "build", 1, None, revision)


def test_the_baseline_is_stored_verbatim_across_reopen(tmp_path: Path) -> None:
    store = _open(tmp_path)
    _ok(store.write_batch([lambda b: b.put_epoch(_row(0))]))
    store.close()
    reopened = EventStore.open(tmp_path)
    assert reopened.epoch(SID) == _row(0)
    reopened.close()


def test_a_stale_revision_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    store = _open(tmp_path)
    _ok(store.write_batch([lambda b: b.put_epoch(_row(0))]))
    _ok(store.write_batch([lambda b: b.put_epoch(_row(1), expected_revision=0)]))
    with pytest.raises(EpochConflictError):
        _ok(store.write_batch([lambda b: b.put_epoch(_row(2, "other"), expected_revision=0)]))
    assert store.epoch(SID) == _row(1)
    store.close()


def test_a_location_move_clears_the_epoch(tmp_path: Path) -> None:
    store = _open(tmp_path)
    _ok(store.write_batch([lambda b: b.put_epoch(_row(0))]))
    moved = ev.Moved(timestamp=2, session_id=SID, location=ev.Location(directory="/b"))
    _ok(store.write_batch([lambda b: b.append(SID, [moved])]))
    assert store.epoch(SID) is None
    assert store.get_session(SID).location.directory == "/b"  # type: ignore[union-attr]
    store.close()
    reopened = EventStore.open(tmp_path)
    assert reopened.epoch(SID) is None
    reopened.close()
