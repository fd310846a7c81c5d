"""Seeds that once broke an invariant, replayed with the simulator as it is now.

Each was found by `python -m sims run`; the comment says what broke and where it was fixed.
They assert the seed still reaches the situation (its trace shows it) and breaks nothing.
"""

from __future__ import annotations

import logging

import pytest

from sims._sim import run_seed

# Seeds found before compaction existed are replayed without compaction pressure
# (compaction=False), the simulator they were found with.
REGRESSIONS = [
    # A tool result write failed (full disk): the turn closed its step failed but left the
    # call without a result, and every later request was refused (UnansweredToolCallError).
    # Fixed in runtime.history.recovery_events and SessionActor._record_failure.
    (1, 3, (3, 9), False, "fault storage.full"),
    # The same after a failed fdatasync with nothing prompting the session again.
    (10, 2, (2, 4), False, "fault storage.fsync"),
    # After two crashes, the start-up wake's drain waited on a permission request and
    # ignored every interrupt (its wake seq counted as newer than any interrupt).
    # Fixed by runtime.drain.WAKE_ANY.
    (25, 1, (2, 3), False, "gives up on 1 asks: interrupt"),
    # Simulator: a deletion in flight at a crash was journaled; the clients did not know.
    (780, 1, (2, 3), False, "generation 2 opens"),
    # Simulator: a torn tail cut into what an earlier generation had synced.
    (926, 1, (2, 3), False, "fault storage.torn"),
    # A failed fdatasync during start-up recovery made open_runtime itself fail; the
    # runtime now starts and the session's actor recovers it before its first drain.
    (39, 5, (3, 9), True, "generation 3 opens"),
    # From the long run. The start-up recovery's write failed (dropped pages) and the
    # session kept two calls without results: recovery is now tried again after the
    # store's restart.
    (1000443, 2, (2, 5), True, "fault storage.fsync pages dropped"),
    # From the long run: a failed fdatasync, then a read in the same batch: the read
    # barrier waited forever for a batch that never reaches the applier (a hang).
    # Fixed in storage's read barrier (tests/storage/test_failed_commit.py).
    (1000504, 2, (2, 5), True, "fault storage.fsync pages dropped"),
    # Simulator: a compaction renews the epoch after the last request; the stored epoch
    # is then newer than every request (its write failed, its pages were kept).
    (1001682, 2, (2, 5), True, "session.next.compaction.ended"),
    # Simulator: an id whose first prompt was lost in a crash is not reused as a conflict
    # (its reuse would be its first admission).
    (1000109, 2, (2, 5), True, "s0 conflict -> nothing to conflict"),
    # Simulator: a session deleted while unpublished events were read back.
    (1000426, 2, (2, 5), True, "session.deleted"),
    # Simulator: the stored epoch is compared with the session's latest requests.
    (1000315, 2, (2, 5), True, "generation 3 opens"),
    # From the long run: a permission reply whose fdatasync failed (the pages were kept)
    # was answered in the store after the restart, but the tool call waiting for it never
    # heard of it; the session stayed busy. Fixed in actors._permissions (the waiting call
    # reads the stored answer; tests/execution/test_permissions.py).
    (1002059, 2, (2, 5), True, "s1 reply reject -> StorageError"),
]


@pytest.mark.parametrize(("seed", "sessions", "actions", "compaction", "marker"), REGRESSIONS)
def test_a_seed_that_once_failed_stays_fixed(
    seed: int, sessions: int, actions: tuple[int, int], compaction: bool, marker: str
) -> None:
    logging.disable(logging.CRITICAL)
    try:
        result = run_seed(seed, sessions=sessions, per_session=actions, compaction=compaction)
    finally:
        logging.disable(logging.NOTSET)
    assert any(marker in line for line in result.trace)
    assert result.violations == []
