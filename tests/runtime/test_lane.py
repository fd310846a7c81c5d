"""The drain lane: an interrupt stops the active drain unless newer input started it."""

from __future__ import annotations

from runtime.drain import WAKE_ANY, Lane


def test_an_interrupt_stops_a_drain_started_for_older_input() -> None:
    lane = Lane()
    assert lane.wake(5) == "start"
    assert lane.interrupt(7) == "cancel"


def test_an_interrupt_spares_a_drain_started_for_newer_input() -> None:
    lane = Lane()
    assert lane.wake(9) == "start"
    assert lane.interrupt(7) == "noop"


def test_a_wake_for_the_whole_inbox_is_stopped_by_a_later_interrupt() -> None:
    # After a restart the runtime wakes every session with pending input (WAKE_ANY);
    # an interrupt arriving while that drain runs must stop it (it used to be spared,
    # so a drain waiting on a permission request could never be interrupted).
    lane = Lane()
    assert lane.wake(WAKE_ANY) == "start"
    assert lane.interrupt(24) == "cancel"


def test_a_wake_for_the_whole_inbox_is_dropped_by_no_barrier() -> None:
    lane = Lane()
    assert lane.interrupt(40) == "noop"
    assert lane.wake(WAKE_ANY) == "start"
