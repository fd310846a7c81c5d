"""The web app across a ``kittiwake serve`` killed with SIGKILL and restarted on the same port
and data dir: the tab shows it is offline, reconnects by itself, catches up from its last seq
(what happened while it was away included) and shows every message once."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from tests.cluster.harness import Node, torture_answers
from tests.gateway.test_cli_run import Cli, provider
from tests.llm.conftest import LocalServer
from tests.web.cdp import chromium

__all__ = ["provider"]  # the fixture, imported for the test here

MODEL = {"id": "m1", "providerID": "local"}
TEXTS = "[...document.querySelectorAll('#messages .msg .text')].map(e => e.textContent)"
IDS = "[...document.querySelectorAll('#messages .msg')].map(e => e.dataset.id)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _prompt(client: httpx.AsyncClient, sid: str, text: str) -> None:
    r = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
    assert r.status_code == 200, r.text
    assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204


async def test_the_tab_reconnects_after_a_sigkill_and_shows_each_message_once(
    tmp_path: Path, provider: LocalServer
) -> None:
    cli = Cli(tmp_path, provider)
    torture_answers(provider)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    async with (
        chromium(tmp_path / "profile") as browser,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        async with Node.running(cli, None, name="one", port=port) as node:
            sid = (await client.post("/api/session", json={"model": MODEL})).json()["data"]["id"]
            await _prompt(client, sid, "one")
            page = await browser.new_page()
            await page.goto(f"{url}/#/session/{sid}")
            await page.until(f"document.body.dataset.session === '{sid}'")
            await page.until("document.getElementById('conn').dataset.state === 'live'")
            await page.type("#prompt-text", "two")
            await page.click("#send")
            await page.until(f"{TEXTS}.includes('re: two')")
            node.process.kill()
            await node.process.wait()
            state = await page.until(
                "document.getElementById('conn').dataset.state !== 'live'"
                " && document.getElementById('conn').textContent"
            )
            assert state == "offline: reconnecting…"
        async with Node.running(cli, None, name="one", port=port):
            # Written while the tab is away (or just back): it comes from the history.
            await _prompt(client, sid, "three")
            await page.until("document.getElementById('conn').dataset.state === 'live'")
            await page.until(f"{TEXTS}.includes('re: three')")
            await page.type("#prompt-text", "four")
            await page.click("#send")
            await page.until(f"{TEXTS}.includes('re: four')")
            texts = await page.evaluate(TEXTS)
            assert texts == [
                "one",
                "re: one",
                "two",
                "re: two",
                "three",
                "re: three",
                "four",
                "re: four",
            ]
            ids = await page.evaluate(IDS)
            assert len(ids) == len(set(ids)) == 8
            # The same timeline as a fresh tab draws it from the API.
            fresh = await browser.new_page()
            await fresh.goto(f"{url}/#/session/{sid}")
            await fresh.until(f"document.body.dataset.session === '{sid}'")
            assert await fresh.evaluate(IDS) == ids
            assert await fresh.evaluate(TEXTS) == texts
        assert page.exceptions == [] and page.policy_violations() == []
