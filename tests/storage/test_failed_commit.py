"""A store whose commit failed answers reads that need the database with an error at once."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from runtime import StorageError
from runtime import events as ev
from storage import AllEvents, CreateSession, EventStore, JournalFiles


class _FailingSync(JournalFiles):
    def __init__(self) -> None:
        self.fail = False

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.fail:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)


def _info(session_id: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=session_id, project_id="p", location=ev.Location(directory="/a"), title="t",
        time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


@pytest.mark.timeout(30)
def test_a_read_after_a_failed_fdatasync_fails_instead_of_waiting_forever(tmp_path: Path) -> None:
    files = _FailingSync()
    store = EventStore.open(tmp_path, journal_files=files)
    try:
        outcomes, _ = store.write_batch([CreateSession(info=_info("ses_a"))])
        assert outcomes[0].error is None
        files.fail = True
        outcomes, _ = store.write_batch([CreateSession(info=_info("ses_b"))])
        assert isinstance(outcomes[0].error, StorageError)
        # The failed batch never reaches the applier: the read barrier used to wait for it.
        with pytest.raises(StorageError, match="must be reopened"):
            store.answer(AllEvents())
    finally:
        files.fail = False
        store.close()
    reopened = EventStore.open(tmp_path)
    try:
        ids = {e.aggregate_id for e in reopened.answer(AllEvents())}
        assert "ses_a" in ids  # ses_b's batch may or may not have reached the file
    finally:
        reopened.close()
