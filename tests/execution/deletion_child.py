"""A runtime process for the deletion kill test: deletes a session, then waits to die.

Usage: python deletion_child.py DATA_DIR
Creates ``ses_doomed`` and ``ses_kept``, admits a prompt into each (``resume=False``),
deletes ``ses_doomed``, prints ``DELETED`` and sleeps until killed. Its applier lingers an
hour, so DuckDB holds only what a read made it catch up on when the process dies.
"""

from __future__ import annotations

import sys

import trio

from runtime import Location, Prompt, llm, open_runtime
from storage._applier import Applier

# Keep every batch out of DuckDB until a reader needs it: the restart must then replay the
# whole journal, the deletion included.
assert Applier.__init__.__kwdefaults__ is not None
Applier.__init__.__kwdefaults__["linger"] = 3600.0


async def main(data_dir: str) -> None:
    async with open_runtime(data_dir=data_dir, llm=llm.ScriptedLLM([])) as rt:
        loc = Location(directory=data_dir)
        for sid in ("ses_doomed", "ses_kept"):
            await rt.sessions.create(id=sid, location=loc)
            await rt.sessions.prompt(sid, prompt=Prompt(text="hello"), resume=False)
        await rt.sessions.delete("ses_doomed")
        print("DELETED", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
