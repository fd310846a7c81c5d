"""The web app's time to first render of a session, with 10 and with 10,000 messages.

Run: .venv/bin/python bench/webapp.py [--runs R] [--sizes 10,10000]

Serves a runtime (DuckDB, the scripted model) on 127.0.0.1, writes one session per size
(rounds of prompts admitted at once, each round one turn: ``tests/web/conftest.py``
``long_session``), and opens each session R times in a new tab of Debian's headless Chromium
(driven over the DevTools protocol, ``tests/web/cdp.py``) at ``/#/session/<id>``. A run is
drawn when the app has put the newest page on screen and caught up from its seq
(``performance.mark("session-drawn")``). Reported, as medians over the runs:

- ``page+session``: from the navigation's start to drawn (the page, its modules, the list of
  sessions and the session);
- ``session``: from the app's opening of the session (``session-open``) to drawn;
- ``to oldest`` (sizes over one page): from drawn, holding the scrollbar at the top, until
  the first message of the session is on screen.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the packages, not this folder's gateway.py

import trio  # noqa: E402

from runtime.llm import ScriptedLLM  # noqa: E402
from tests.gateway.conftest import answer, served  # noqa: E402
from tests.web.cdp import chromium  # noqa: E402
from tests.web.conftest import long_session  # noqa: E402

TO_OLDEST = """(async () => {
  const t = document.getElementById('timeline'), older = document.getElementById('older');
  const start = performance.now();
  while (older.textContent !== 'Start of the session' || t.scrollTop > 0) {
    t.scrollTop = 0;
    await new Promise((r) => requestAnimationFrame(r));
  }
  return performance.now() - start;
})()"""
MARKS = """[performance.getEntriesByName('session-open').at(-1).startTime,
 performance.getEntriesByName('session-drawn').at(-1).startTime]"""


async def measure(runs: int, sizes: list[int]) -> None:
    llm = ScriptedLLM(lambda request: answer("ok"), event_checkpoints=False)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with served(root, llm=llm) as g, chromium(root / "profile") as browser:
            sessions = {}
            for size in sizes:
                rounds = max(1, size // 1000)
                prompts = size // rounds - 1
                started = time.perf_counter()
                sid = sessions[size] = await long_session(
                    g.rt, root, rounds=rounds, prompts=prompts
                )
                took = time.perf_counter() - started
                held, cursor = 0, None
                while True:
                    page = await g.rt.sessions.messages(sid, limit=200, cursor=cursor)
                    held, cursor = held + len(page.data), page.next
                    if cursor is None:
                        break
                print(f"{size:>6}: a session of {held} messages written in {took:.1f} s")
            print(
                f"{'messages':>8}  {'page+session ms':>15}  {'session ms':>10}  {'to oldest ms':>12}"
            )
            for size, sid in sessions.items():
                whole, alone, oldest = [], [], []
                for _ in range(runs):
                    page = await browser.new_page()
                    await page.goto(f"{g.url}/#/session/{sid}")
                    await page.until(f"document.body.dataset.session === '{sid}'", within=60)
                    opened, drawn = await page.evaluate(MARKS)
                    whole.append(drawn)
                    alone.append(drawn - opened)
                    if size > 50:
                        oldest.append(await page.evaluate(TO_OLDEST))
                    await page.close()
                median = f"{statistics.median(oldest):>12.0f}" if oldest else f"{'-':>12}"
                print(
                    f"{size:>8}  {statistics.median(whole):>15.0f}  {statistics.median(alone):>10.0f}  {median}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sizes", default="10,10000")
    args = parser.parse_args()
    trio.run(measure, args.runs, [int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
