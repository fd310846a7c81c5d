"""Seeds that once broke an invariant, replayed with the simulator as it is now.

Each was found by `python -m sims run`; the comment says what broke and where it was fixed.
They assert the seed still reaches the situation (its trace shows it) and breaks nothing.
"""

from __future__ import annotations

import logging

import pytest

from sims._runner import expand_faults
from sims._sim import run_seed
from sims._workload import Features

# Each seed replays on the simulator it was found with: FIRST (before compaction,
# questions and tasks), COMPACTION (compaction only) or QUESTIONS (compaction and
# questions, no tasks yet); see sims._workload.Features.
# FAULTS names the fault kinds a seed chooses from (`--faults`) when not all.
FIRST = Features(compaction=False, questions=False, tasks=False)
COMPACTION = Features(questions=False, tasks=False)
QUESTIONS = Features(tasks=False)
REGRESSIONS = [
    # A tool result write failed (full disk): the turn closed its step failed but left the
    # call without a result, and every later request was refused (UnansweredToolCallError).
    # Fixed in runtime.history.recovery_events and SessionActor._record_failure.
    (1, 3, (3, 9), FIRST, "fault storage.full"),
    # The same after a failed fdatasync with nothing prompting the session again.
    (10, 2, (2, 4), FIRST, "fault storage.fsync"),
    # After two crashes, the start-up wake's drain waited on a permission request and
    # ignored every interrupt (its wake seq counted as newer than any interrupt).
    # Fixed by runtime.drain.WAKE_ANY.
    (25, 1, (2, 3), FIRST, "gives up on 1 asks: interrupt"),
    # Simulator: a deletion in flight at a crash was journaled; the clients did not know.
    # (Found as 780, which later changes of the runtime moved away.)
    (65, 1, (2, 3), COMPACTION, "s0 deletion in flight at the crash: kept"),
    # Simulator: a torn tail cut into what an earlier generation had synced.
    (926, 1, (2, 3), FIRST, "fault storage.torn"),
    # A failed fdatasync during start-up recovery made open_runtime itself fail; the
    # runtime now starts and the session's actor recovers it before its first drain.
    (39, 5, (3, 9), COMPACTION, "generation 3 opens"),
    # From the long run. The start-up recovery's write failed (dropped pages) and the
    # session kept two calls without results: recovery is now tried again after the
    # store's restart.
    (1000443, 2, (2, 5), COMPACTION, "fault storage.fsync pages dropped"),
    # From the long run: a failed fdatasync, then a read in the same batch: the read
    # barrier waited forever for a batch that never reaches the applier (a hang).
    # Fixed in storage's read barrier (tests/storage/test_failed_commit.py).
    (1000504, 2, (2, 5), COMPACTION, "fault storage.fsync pages dropped"),
    # Simulator: a compaction renews the epoch after the last request; the stored epoch
    # is then newer than every request (its write failed, its pages were kept).
    (1001682, 2, (2, 5), COMPACTION, "session.next.compaction.ended"),
    # Simulator: an id whose first prompt was lost in a crash is not reused as a conflict
    # (its reuse would be its first admission).
    (1000109, 2, (2, 5), COMPACTION, "s0 conflict -> nothing to conflict"),
    # Simulator: a session deleted while unpublished events were read back.
    (1000426, 2, (2, 5), COMPACTION, "session.deleted"),
    # Simulator: the stored epoch is compared with the session's latest requests.
    (1000315, 2, (2, 5), COMPACTION, "generation 3 opens"),
    # From the long run (1002059 then, which a later change of the runtime moved away): a
    # permission reply whose fdatasync failed (the pages were kept) was answered in the
    # store after the restart, but the tool call waiting for it never heard of it; the
    # session stayed busy. Fixed in actors.session._permissions (the waiting call reads the stored
    # answer; tests/execution/test_permissions.py).
    # Seed 3011 reaches the situation again (a reply's fdatasync fails, the pages are kept,
    # the waiting call reads the stored answer); without the fix its session is freed
    # another way, so the direct test is what shows the bug. (Seed 3028 did, until
    # recovery began reading a session's questions when it closes a call; seed 3203, until
    # a prompt naming its message opened an idle session in its own admission.)
    (3011, 4, (3, 9), COMPACTION, "s2 reply once -> StorageError"),
    # From the long run: the events of a batch reported failed (its fdatasync failed, the
    # pages were kept) were in the store after the restart but never published: the
    # checker saw a seq gap. Fixed in actors.store._storage (published once the store reopens,
    # before anything newer; tests/storage/test_failed_commit.py). So were 1002007, 1002038.
    (1002062, 2, (2, 5), COMPACTION, "fault storage.fsync pages kept"),
    # From the long run: a batch whose fdatasync failed with its pages kept was too big for
    # the segment; the reopened journal started the next segment without syncing it, and
    # a power loss cut it out from under later records: the journal never opened again (the
    # run looped, process after process). Fixed in storage._journal (open syncs the tail;
    # tests/storage/test_journal.py) and EventStore.open (a failed open releases the lock).
    (1000004, 2, (2, 5), COMPACTION, "fault storage.torn journal-0000000000000018.seg"),
    # From the long run: the store caught its database up from a batch a failed fdatasync
    # left in the journal, then a second failure dropped those pages: the database was
    # ahead of the journal and the store never opened again. Fixed by Journal.open syncing
    # the tail (tests/storage/test_failed_commit.py).
    (1001565, 2, (2, 5), COMPACTION, "fault storage.fsync pages kept"),
    # From the third long run: a tool result's write failed (full disk) and the turn closed
    # its step failed; a crash then cut the recovery that closes the call. Start-up
    # recovery did not list the session (its run had failed: nothing to resume), so the
    # call stayed without a result. Fixed in runtime.history.needs_recovery, which the
    # stores' SessionsNeedingResume uses (tests/storage/test_store_contract.py,
    # tests/runtime/test_recovery.py).
    (1111584, 2, (2, 5), COMPACTION, "fault storage.crash at commit point 58"),
    # From the third long run, no crash: a tool result's write failed (fdatasync), the turn
    # closed its step failed, and the write that closes the call failed too (pages
    # dropped); the call was left to the session's next drain, which never came. The
    # closing write is now tried again on the restarted store (actors.session._recovery.
    # close_failed_turn; tests/execution/test_failed_turn_recovery.py).
    (1119374, 2, (2, 5), COMPACTION, "fault storage.fsync pages dropped"),
    # From the long run, simulator: the stored epoch renewed by a compaction after the last
    # request (the same as 1001682).
    (1001766, 2, (2, 5), COMPACTION, "session.next.compaction.ended"),
    (1002378, 2, (2, 5), COMPACTION, "session.next.compaction.ended"),
    # From the long run (1004643, which later changes moved away), simulator: a deletion
    # reported failed (its fdatasync failed, the pages were kept) was in the store; the
    # client now asks the store when faults stop.
    (1004215, 2, (2, 5), COMPACTION, "s0 deletion reported failed: kept"),
    # Simulator: the turn cap counted turns across a crash and the explicit resume after it.
    (143, 2, (2, 5), COMPACTION, "s0 resume -> ok"),
    # From the fifth long run: a crash cut a tool call, and the restarted runtime's
    # recovery writes failed three times in a row (a full disk, then two fdatasyncs whose
    # pages were dropped); start-up recovery gave up after two and nothing woke the
    # session, so the call stayed without a result. Recovery writes are now tried
    # RECOVERY_ATTEMPTS times, and a session still not recovered is woken so its actor
    # recovers it (actors.session._recovery.recover_until_written;
    # tests/execution/test_failed_turn_recovery.py).
    (1182887, 2, (2, 5), COMPACTION, "fault storage.full"),
    # A question's answer whose fdatasync failed (the pages were kept) was in the store
    # after the restart, but the call waiting for it never heard of it: the session stayed
    # busy (found by reading first; fixed in actors.session._replies, shared with permission
    # replies, tests/execution/test_session_tools.py). Without the fix this seed fails
    # the liveness check.
    (116, 4, (3, 9), QUESTIONS, "s2 answer reply -> StorageError"),
]
FAULTS: dict[int, str] = {
    65: "storage.crash",
    143: "storage.crash",
    116: "storage.fsync",
    3011: "storage.fsync",
    1004215: "storage.fsync",
}


@pytest.mark.parametrize(("seed", "sessions", "actions", "features", "marker"), REGRESSIONS)
def test_a_seed_that_once_failed_stays_fixed(
    seed: int, sessions: int, actions: tuple[int, int], features: Features, marker: str
) -> None:
    faults = expand_faults(FAULTS.get(seed))
    logging.disable(logging.CRITICAL)
    try:
        result = run_seed(
            seed, sessions=sessions, per_session=actions, features=features, faults=faults
        )
    finally:
        logging.disable(logging.NOTSET)
    assert any(marker in line for line in result.trace)
    assert result.violations == []
