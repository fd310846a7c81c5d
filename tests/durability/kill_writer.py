"""Admit prompts in a loop until killed; print each acknowledged receipt.

Usage: python kill_writer.py DATA_DIR SESSIONS

Creates sessions ``ses_kill<i>`` if absent, prints ``ready``, then runs one admitting
task per session (``resume=False``), printing ``<session id> <message id>`` for every
prompt whose call returned, flushing each line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from runtime import Location, Prompt, open_runtime


async def main(data_dir: Path, count: int) -> None:
    async with open_runtime(data_dir=data_dir) as rt:
        ids = [f"ses_kill{i}" for i in range(count)]
        for sid in ids:
            await rt.sessions.create(id=sid, location=Location(directory=str(data_dir)))
        print("ready", flush=True)

        async def admit(sid: str) -> None:
            n = 0
            while True:
                n += 1
                rec = await rt.sessions.prompt(sid, prompt=Prompt(text=f"{sid} {n}"), resume=False)
                print(sid, rec.id, flush=True)

        async with trio.open_nursery() as nursery:
            for sid in ids:
                for _ in range(4):
                    nursery.start_soon(admit, sid)


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
