"""Kittiwake's web app against OpenCode's (``opencode serve``), in Chromium, on one model.

Run: .venv/bin/python bench/webapp_vs_opencode.py [--runs 10] [--answers 100]

Needs ``make opencode`` (the pinned clients in ``clients/node_modules``) and Chromium.

One local chat-completions mock (``tests/opencode/harness.py``'s ``Provider``) serves both
``kittiwake serve`` and ``opencode serve --pure`` (the set-up of ``bench/tui.py``: nothing
beyond 127.0.0.1). Each server gets a session (``POST /session``) and a headless Chromium
tab showing it in its own web app: Kittiwake's at ``/#/session/<id>``, OpenCode's at
``/<base64url of the directory>/session/<id>``. A prompt ``bench N`` is answered ``B<N>x
word0 ... E<N>x.`` in ``--chunks`` chunks ``--delay`` s apart.

- **prompt to first visible character**: the prompt is posted (``POST
  /session/{id}/prompt_async``, the same V1 route on both, so neither UI's editor is
  measured) while a MutationObserver in the tab waits for ``B<N>x`` in the page's text;
  from just before the POST to the observer's callback (both on the machine's clock,
  ``Date.now()``). Two warm-up prompts, then ``--runs`` per server, interleaved, the order
  alternating.
- **memory after streaming ``--answers`` answers** into the open tab: the tab's JS heap
  (``Runtime.getHeapUsage``, after a garbage collection) and its DOM node count.

Medians are printed.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._opencode import OpenCodeServe  # noqa: E402
from bench.tui import responder  # noqa: E402
from tests.opencode.harness import OPENCODE, Kittiwake, Provider  # noqa: E402
from tests.web.cdp import Page, chromium  # noqa: E402

WATCH = """(() => {{
  window.__seen = new Promise((resolve) => {{
    const check = () => document.body.textContent.includes({marker!r}) && (observer.disconnect(), resolve(Date.now()));
    const observer = new MutationObserver(check);
    observer.observe(document.body, {{ subtree: true, childList: true, characterData: true }});
  }});
  return true;
}})()"""


class Side:
    def __init__(self, name: str, url: str, directory: Path) -> None:
        self.name = name
        self.url = url
        self.directory = directory
        self.http = httpx.Client(base_url=url, timeout=60)
        self.sid = ""
        self.page: Page | None = None
        self.first: list[float] = []

    def session(self) -> str:
        r = self.http.post("/session", json={}, params={"directory": str(self.directory)})
        r.raise_for_status()
        self.sid = str(r.json()["id"])
        return self.sid

    def page_url(self) -> str:
        if self.name == "kittiwake":
            return f"{self.url}/#/session/{self.sid}"
        slug = base64.urlsafe_b64encode(str(self.directory).encode()).decode().rstrip("=")
        return f"{self.url}/{slug}/session/{self.sid}"

    async def prompt(self, n: int, within: float = 30) -> float:
        assert self.page is not None
        await self.page.send("Page.bringToFront")  # a hidden tab draws no animation frames
        await self.page.evaluate(WATCH.format(marker=f"B{n}x"))
        body = {"parts": [{"type": "text", "text": f"bench {n}"}]}
        started = time.time() * 1000
        r = await trio.to_thread.run_sync(
            lambda: self.http.post(f"/session/{self.sid}/prompt_async", json=body)
        )
        assert r.status_code in (200, 204), r.text
        with trio.move_on_after(within):
            seen = await self.page.evaluate("window.__seen")
            await self.idle(n, within)  # the next prompt starts from an idle session
            return float(seen) - started
        text = await self.page.evaluate("document.body.innerText.slice(-600)")
        raise RuntimeError(f"{self.name}: B{n}x not shown in time; the page ends {text!r}")

    async def idle(self, n: int, within: float) -> None:
        with trio.fail_after(within):
            while True:
                status = await trio.to_thread.run_sync(lambda: self.http.get("/session/status"))
                text = await self.page.evaluate("document.body.textContent") if self.page else ""
                if self.sid not in status.json() and f"E{n}x" in text:
                    return
                await trio.sleep(0.05)


async def run(runs: int, answers: int, chunks: int, delay: float) -> None:
    if not OPENCODE.exists():
        raise SystemExit("needs the pinned clients: run `make opencode`")
    tmp = Path(tempfile.mkdtemp(prefix="bench-web-"))
    provider = Provider(responder(chunks, delay)).start()
    kittiwake = Kittiwake(tmp / "kittiwake", provider)
    opencode = OpenCodeServe(tmp / "opencode", provider.port)
    try:
        kittiwake.start()
        opencode.start()
        sides = [
            Side("kittiwake", kittiwake.url, kittiwake.project),
            Side("opencode", opencode.url, opencode.project),
        ]
        async with chromium(tmp / "profile") as browser:
            for side in sides:
                side.session()
                side.page = await browser.new_page()
                await side.page.goto(side.page_url())
                await trio.sleep(8)  # the app settles (no condition common to both apps)
                shown = await side.page.evaluate("document.body.innerText.slice(0, 80)")
                print(f"{side.name}: {side.page_url()} shows {shown!r}", flush=True)
            n = 0
            for side in sides:
                for _ in range(2):
                    n += 1
                    await side.prompt(n)
            for r in range(runs):
                for side in sides if r % 2 == 0 else sides[::-1]:
                    n += 1
                    side.first.append(await side.prompt(n))
            print(f"{runs} prompts each, {chunks} chunks {delay * 1000:.0f} ms apart")
            for side in sides:
                print(f"{side.name}: prompt -> first visible character, median "
                      f"{statistics.median(side.first):.0f} ms (all: "
                      f"{', '.join(f'{v:.0f}' for v in side.first)})")  # fmt: skip
            for side in sides:
                for _ in range(answers - runs - 2):
                    n += 1
                    await side.prompt(n)
                assert side.page is not None
                await side.page.send("HeapProfiler.collectGarbage")
                heap: Any = await side.page.send("Runtime.getHeapUsage")
                nodes = await side.page.evaluate("document.getElementsByTagName('*').length")
                print(f"{side.name}: after {answers} answers, JS heap "
                      f"{heap['usedSize'] / 1e6:.1f} MB used, {nodes} elements")  # fmt: skip
    finally:
        kittiwake.stop()
        opencode.stop()
        await trio.to_thread.run_sync(provider.stop)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="measured prompts per app (10)")
    parser.add_argument("--answers", type=int, default=100, help="answers before memory (100)")
    parser.add_argument("--chunks", type=int, default=20, help="SSE chunks per answer (20)")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between chunks")
    args = parser.parse_args()
    trio.run(run, args.runs, args.answers, args.chunks, args.delay)
