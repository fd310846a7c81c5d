"""Admit prompts with small backup thresholds, and SIGKILL this process inside a backup.

Usage: python backup_killer.py DATA_DIR POINT BACKUP_EVERY PROMPTS NTH

Opens the runtime on DATA_DIR (journal segments of 4 KiB, a backup every BACKUP_EVERY
batches), creates ``ses_bk`` if absent, admits PROMPTS prompts one after another and
closes. Prints ``backing up <lsn>`` when a backup starts, ``backed up <lsn>`` when its
copy is installed, and ``<message id>`` for every prompt whose call returned.

The NTH backup of this process (1: the first, which may be the one due at open) kills
the process with SIGKILL at POINT:

- ``copy``: before the copy starts (the checkpoint ran)
- ``torn-copy``: half the database copied into the staging file
- ``verified``: the staging copy verified, not yet renamed over the backup
- ``installed``: renamed over the backup, the journal not yet released
- ``rotated``: the journal started a new segment, no segment deleted yet
- ``released``: one covered segment deleted, the others not
- ``none``: never
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import trio

import storage._backup as backups
import storage._journal as journal
import storage._pipeline as store
from runtime import Location, Prompt, open_runtime

POINT = sys.argv[2]
NTH = int(sys.argv[5])
_backups = 0
_deleted = 0
_output = threading.Lock()


def _say(line: str) -> None:
    """Print one whole line: backups run on the store's thread, receipts on trio's."""
    with _output:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _die() -> None:
    _say("dying")
    os.kill(os.getpid(), signal.SIGKILL)


def _patch() -> None:
    write_backup, copy_file = store.write_backup, backups._copy_file
    verify, install = backups._verify, backups._install
    delete_segment = journal._delete_segment

    def at(point: str) -> bool:
        return POINT == point and _backups == NTH

    def writing(directory: Path, source: Path, lsn: int, conn: Any) -> float:
        global _backups
        _backups += 1
        _say(f"backing up {lsn}")
        if at("copy"):
            _die()
        seconds = write_backup(directory, source, lsn, conn)
        _say(f"backed up {lsn}")
        return seconds

    def copying(source: Path, target: Path) -> None:
        if at("torn-copy"):
            data = source.read_bytes()
            with target.open("wb") as file:
                file.write(data[: len(data) // 2])
                file.flush()
                os.fsync(file.fileno())
            _die()
        copy_file(source, target)

    def verifying(path: Path, lsn: int, conn: Any) -> None:
        verify(path, lsn, conn)
        if at("verified"):
            _die()

    def installing(staging: Path, backup: Path) -> None:
        install(staging, backup)
        if at("installed"):
            _die()

    def deleting(path: Path) -> None:
        global _deleted
        if at("rotated"):
            _die()
        if at("released") and _deleted == 1:
            _die()
        _deleted += 1 if _backups == NTH else 0
        delete_segment(path)

    store.write_backup = writing
    backups._copy_file = copying
    backups._verify = verifying
    backups._install = installing
    journal._delete_segment = deleting


async def main(data: Path, backup_every: int, prompts: int) -> None:
    options = {"backup_every": backup_every, "journal_segment_bytes": 4096}
    async with open_runtime(data_dir=data, store_options=options) as rt:
        await rt.sessions.create(id="ses_bk", location=Location(directory=str(data)))
        for n in range(prompts):
            receipt = await rt.sessions.prompt(
                "ses_bk", prompt=Prompt(text=f"prompt {n}"), resume=False
            )
            _say(receipt.id)


if __name__ == "__main__":
    _patch()
    trio.run(main, Path(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4]))
