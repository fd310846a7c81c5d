"""A runtime process for the deletion kill test: deletes a session, then waits to die.

Usage: python deletion_child.py DATA_DIR
Creates ``ses_doomed``, ``ses_journaled`` and ``ses_kept``, admits a prompt into each
(``resume=False``), deletes ``ses_doomed`` (``rt.sessions.delete``, whose last read makes
DuckDB catch up) and then ``ses_journaled`` with the bare storage operation, prints
``DELETED`` and sleeps until killed. Its applier lingers an hour, so the second deletion is
only in the journal when the process dies.
"""

from __future__ import annotations

import sys

import trio

from runtime import Location, Prompt, llm, open_runtime
from storage import DeleteSession
from storage._worker import Applier

# Keep every batch out of DuckDB until a reader needs it: the restart must then replay the
# whole journal, the deletion included.
assert Applier.__init__.__kwdefaults__ is not None
Applier.__init__.__kwdefaults__["linger"] = 3600.0


async def main(data_dir: str) -> None:
    async with open_runtime(data_dir=data_dir, llm=llm.ScriptedLLM([])) as rt:
        loc = Location(directory=data_dir)
        for sid in ("ses_doomed", "ses_journaled", "ses_kept"):
            await rt.sessions.create(id=sid, location=loc)
            await rt.sessions.prompt(sid, prompt=Prompt(text="hello"), resume=False)
        await rt.sessions.delete("ses_doomed")
        await rt.storage.write(DeleteSession(session_id="ses_journaled", timestamp=0))
        print("DELETED", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
