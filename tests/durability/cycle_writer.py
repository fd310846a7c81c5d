"""A fork server for start-stop cycles: each cycle is a fresh process, forked once warm.

Usage: python cycle_writer.py DATA_DIR BACKUP_EVERY BACKUP_JOURNAL_BYTES

Imports the runtime once (about 0.4 s of interpreter and import start-up that 200
cycles would otherwise pay each), then reads one command per line on stdin::

    OUT_PATH PROMPTS CYCLES

and forks a child per command. A cycle opens the runtime on DATA_DIR (a real DuckDB
file and journal) with the given backup thresholds, creates the sessions ``ses_cyc0``
and ``ses_cyc1`` if absent, writes ``ready`` to OUT_PATH, then admits prompts, writing
``<session id> <message id>`` for each one whose call returned. With PROMPTS > 0 it
admits that many and closes the runtime, then writes ``held <records> <bytes>``: what
the journal holds once closed; the child runs CYCLES such cycles, one after another,
and exits 0. With PROMPTS 0 it admits until killed. The server prints the child's pid,
waits for it, and prints its wait status; the caller may SIGKILL the pid meanwhile.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from pathlib import Path
from typing import TextIO

import trio

from runtime import Location, Prompt, open_runtime
from storage import Journal

SESSIONS = ("ses_cyc0", "ses_cyc1")


async def cycle(data: Path, out: TextIO, prompts: int, options: dict[str, int]) -> None:
    async with open_runtime(data_dir=data, store_options=options) as rt:
        for sid in SESSIONS:
            await rt.sessions.create(id=sid, location=Location(directory=str(data)))
        print("ready", file=out, flush=True)
        n = 0

        async def admit(sid: str) -> None:
            nonlocal n
            while prompts == 0 or n < prompts:
                n += 1
                receipt = await rt.sessions.prompt(
                    sid, prompt=Prompt(text=f"{sid} {n} " + "x" * 200), resume=False
                )
                print(sid, receipt.id, file=out, flush=True)

        async with trio.open_nursery() as nursery:
            for sid in SESSIONS:
                nursery.start_soon(admit, sid)


def child(data: Path, out_path: str, prompts: int, cycles: int, options: dict[str, int]) -> None:
    with open(out_path, "w") as out:
        for _ in range(cycles):
            trio.run(cycle, data, out, prompts, options)
            with Journal.open(data / "journal") as journal:
                print("held", journal.held_records, journal.held_bytes, file=out, flush=True)


def main() -> None:
    data = Path(sys.argv[1])
    options = {"backup_every": int(sys.argv[2]), "backup_journal_bytes": int(sys.argv[3])}
    assert threading.active_count() == 1, "forking needs a single-threaded server"
    gc.freeze()  # children would otherwise copy every page the collector walks
    for line in sys.stdin:
        out_path, prompts, cycles = line.split()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                child(data, out_path, int(prompts), int(cycles), options)
            except BaseException as exc:  # noqa: BLE001 - reported through the exit status
                print(f"child failed: {exc!r}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(status, flush=True)


if __name__ == "__main__":
    main()
