"""The tab's live connection through a TCP proxy that stops passing bytes without closing
anything: the tab shows the connection stale once the heartbeats stop, makes it again, and,
once bytes pass again, catches up with what was written meanwhile, each message once."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import trio

from tests.waiting import eventually
from tests.web.cdp import chromium
from tests.web.conftest import Web, web

TEXTS = "[...document.querySelectorAll('#messages .msg .text')].map(e => e.textContent)"
STATE = "document.getElementById('conn').dataset.state"


class Proxy:
    """Forwards TCP connections from its port to *upstream*'s; while frozen, nothing passes
    either way (connections stay open)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.flowing = trio.Event()
        self.flowing.set()
        self.heartbeats = 0

    def freeze(self) -> None:
        self.flowing = trio.Event()

    def thaw(self) -> None:
        self.flowing.set()

    async def _pipe(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        try:
            while data := await source.receive_some(65536):
                await self.flowing.wait()
                self.heartbeats += data.count(b'"type":"server.heartbeat"')
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    async def handle(self, client: trio.SocketStream) -> None:
        await self.flowing.wait()
        try:
            server = await trio.open_tcp_stream("127.0.0.1", self.upstream)
        except OSError:
            await client.aclose()
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pipe, client, server)
            nursery.start_soon(self._pipe, server, client)


async def test_a_silent_connection_shows_stale_and_catches_up_when_it_flows_again(
    tmp_path: Path,
) -> None:
    async with web(tmp_path, heartbeat=0.2) as w, trio.open_nursery() as nursery:
        port = int(w.g.url.rsplit(":", 1)[1])
        proxy = Proxy(port)
        listeners = await nursery.start(partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1"))
        proxy.port = listeners[0].socket.getsockname()[1]
        sid = await w.session()
        await _prompt(w, sid, "one")
        async with chromium(tmp_path / "profile-proxy") as browser:
            page = await browser.new_page()
            await page.goto(f"http://127.0.0.1:{proxy.port}/#/session/{sid}")
            await page.until(f"document.body.dataset.session === '{sid}' && {STATE} === 'live'")
            await page.until(f"{TEXTS}.length === 2")
            await page.evaluate("(() => { window.states = []; new MutationObserver(() =>"
                                " window.states.push(document.getElementById('conn').dataset.state))"
                                ".observe(document.getElementById('conn'), {attributes: true}); })()")  # fmt: skip
            beats = proxy.heartbeats
            await eventually(lambda: proxy.heartbeats > beats)  # the tab has the interval
            proxy.freeze()
            text = await page.until(
                f"{STATE} === 'stale' && document.getElementById('conn').textContent"
            )
            assert text == "stale: no word from the server"
            await _prompt(w, sid, "two")  # past the proxy, while the tab hears nothing
            await page.until(f"{STATE} === 'reconnecting'")  # given up on the silent stream
            assert await page.evaluate(TEXTS) == ["one", "answer 1"]
            proxy.thaw()
            await page.until(f"{STATE} === 'live'")
            await page.until(f"{TEXTS}.length === 4")
            assert await page.evaluate(TEXTS) == ["one", "answer 1", "two", "answer 3"]
            states = await page.evaluate("window.states")
            assert states[:2] == ["stale", "reconnecting"] and states[-1] == "live"
            ids = await page.evaluate(
                "[...document.querySelectorAll('#messages .msg')].map(m => m.dataset.id)"
            )
            assert len(set(ids)) == 4
            assert page.exceptions == [] and page.policy_violations() == []
        nursery.cancel_scope.cancel()


async def _prompt(w: Web, sid: str, text: str) -> None:
    r = await w.client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
    assert r.status_code == 200, r.text
    assert (await w.client.post(f"/api/session/{sid}/wait")).status_code == 204
