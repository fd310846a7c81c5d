"""Debian's headless Chromium driven over the DevTools protocol (a websocket), for the web
app's tests: a browser process per block, pages to navigate, evaluate, wait on, type into
and click, and the console messages, exceptions and CSP reports each page produced."""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from tests.gateway.test_inspector_browser import CHROMIUM, FLAGS

__all__ = ["Browser", "Page", "chromium"]

_LISTENING = re.compile(rb"DevTools listening on (ws://\S+)")
# The inspector test's flags, less the virtual time budget (these pages stay live).
_FLAGS = [f for f in FLAGS if not f.startswith("--virtual-time-budget")] + [
    # every tab runs its timers and frames as a visible one does
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
]
_WAIT = """
new Promise((resolve) => {
  const test = () => { try { return (%s); } catch (e) { return undefined; } };
  const first = test();
  if (first) { resolve(first); return; }
  const watch = new MutationObserver(() => {
    const value = test();
    if (value) { watch.disconnect(); clearInterval(tick); resolve(value); }
  });
  watch.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
  // scroll positions and storage change without a mutation: look again each animation frame
  const tick = setInterval(() => { const v = test(); if (v) { watch.disconnect(); clearInterval(tick); resolve(v); } }, 50);
})
"""


class CdpError(Exception):
    """A DevTools command answered with an error."""


class Browser:
    """One Chromium over its browser-level DevTools websocket; pages share it (flat sessions)."""

    def __init__(self, ws: WebSocketConnection, nursery: trio.Nursery) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.pages: dict[str, Page] = {}
        nursery.start_soon(self._read)

    async def _read(self) -> None:
        while True:
            try:
                message = json.loads(await self._ws.get_message())
            except ConnectionClosed:
                return  # the browser ended
            if "id" in message:
                channel = self._waiting.pop(message["id"], None)
                if channel is not None:
                    channel.send_nowait(message)
            elif message.get("sessionId") in self.pages:
                self.pages[message["sessionId"]]._event(message["method"], message["params"])

    async def send(self, method: str, session: str | None = None, **params: Any) -> Any:
        """Send one command; its result. Raises CdpError for an error answer."""
        number = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[number] = send
        frame: dict[str, Any] = {"id": number, "method": method, "params": params}
        if session is not None:
            frame["sessionId"] = session
        await self._ws.send_message(json.dumps(frame))
        answer = await receive.receive()
        if "error" in answer:
            raise CdpError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    async def new_context(self) -> str:
        """A new browser context (an incognito-like profile: no cookies, cache or
        credentials shared with the others); its id, for ``new_page``."""
        return str((await self.send("Target.createBrowserContext"))["browserContextId"])

    async def new_page(
        self, width: int = 1200, height: int = 800, context: str | None = None
    ) -> Page:
        """A new tab on about:blank (in the browser context *context*, else the default
        one) with the runtime, log and page domains on."""
        where = {"browserContextId": context} if context is not None else {}
        target = await self.send("Target.createTarget", url="about:blank", **where)
        attached = await self.send(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        page = Page(self, attached["sessionId"], target["targetId"])
        self.pages[page.session] = page
        for domain in ("Page", "Runtime", "Log"):
            await page.send(f"{domain}.enable")
        await page.send("Page.bringToFront")
        await page.send(
            "Emulation.setDeviceMetricsOverride", width=width, height=height,
            deviceScaleFactor=1, mobile=False,
        )  # fmt: skip
        return page


class Page:
    """One tab: what it logged (``console``, ``exceptions``, ``log``) and ways to drive it."""

    def __init__(self, browser: Browser, session: str, target: str) -> None:
        self.browser = browser
        self.session = session
        self.target = target
        self.console: list[str] = []
        self.exceptions: list[str] = []
        self.log: list[str] = []
        self._loaded = trio.Event()

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Page.loadEventFired":
            self._loaded.set()
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.console.append(f"{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description", details["text"]))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.log.append(f"{entry['level']} {entry['source']}: {entry['text']}")

    async def send(self, method: str, **params: Any) -> Any:
        return await self.browser.send(method, self.session, **params)

    async def goto(self, url: str) -> None:
        """Navigate to *url* and wait for its load event."""
        self._loaded = trio.Event()
        await self.send("Page.navigate", url=url)
        with trio.fail_after(30):
            await self._loaded.wait()

    async def evaluate(self, expression: str) -> Any:
        """The value of *expression* (awaited when a promise). Raises CdpError when it throws."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def until(self, condition: str, within: float = 20) -> Any:
        """The first truthy value of the JS *condition*, looked at after each DOM change."""
        with trio.fail_after(within):
            return await self.evaluate(_WAIT % condition)

    async def click(self, selector: str) -> None:
        found = await self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return false; el.click(); return true; })()"
        )
        assert found, f"nothing matches {selector}"

    async def type(self, selector: str, text: str) -> None:
        """Focus *selector* and type *text* into it as keyboard input."""
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.send("Input.insertText", text=text)

    async def screenshot(self, path: Path) -> bytes:
        """Write a PNG of the page to *path*; its bytes."""
        shot = await self.send("Page.captureScreenshot", format="png")
        data = base64.b64decode(shot["data"])
        await trio.Path(path).write_bytes(data)
        return data

    async def close(self) -> None:
        """Close the tab."""
        await self.browser.send("Target.closeTarget", targetId=self.target)
        del self.browser.pages[self.session]

    def policy_violations(self) -> list[str]:
        """Console and log lines reporting a Content-Security-Policy refusal."""
        return [line for line in self.console + self.log if "Content Security Policy" in line]


@asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[Browser]:
    """A headless Chromium with its own *profile*, ended when the block ends."""
    command = [
        CHROMIUM,
        *_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        "about:blank",
    ]
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(command, stderr=-1, stdout=-3)
        try:
            assert process.stderr is not None
            url = None
            seen = b""
            with trio.fail_after(30):
                while url is None:
                    chunk = await process.stderr.receive_some(4096)
                    assert chunk, (
                        f"Chromium ended before listening: {seen.decode(errors='replace')}"
                    )
                    seen += chunk
                    found = _LISTENING.search(seen)
                    url = found[1].decode() if found else None
            nursery.start_soon(_drain, process.stderr)
            async with (
                open_websocket_url(url, max_message_size=64 * 1024 * 1024) as ws,
                trio.open_nursery() as reading,
            ):
                try:
                    yield Browser(ws, reading)
                finally:
                    reading.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
        finally:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some(65536):
        pass
