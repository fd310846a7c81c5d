"""Sharing in Chromium: the owner shares a session from the page, the link opens it
read-only in a second browser context that has no password, follows a running answer live,
and stops working once the owner unshares it."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from runtime.llm import StepFinish, StepStart, TextDelta, TextEnd, TextStart, Usage
from tests.gateway.conftest import answer
from tests.web.conftest import HOLD, HeldLLM, call, web


async def test_a_shared_link_opens_read_only_follows_live_and_stops_once_unshared(
    tmp_path: Path,
) -> None:
    slow = [
        StepStart(), TextStart(id="t1"), TextDelta(id="t1", delta="streaming <b>half</b>, "), HOLD,
        TextDelta(id="t1", delta="and the rest"), TextEnd(id="t1"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ]  # fmt: skip
    todos = [
        {"content": "read <b>it</b>", "status": "completed", "priority": "high"},
        {"content": "write it", "status": "in_progress", "priority": "low"},
    ]
    llm = HeldLLM(
        [call("c1", "todowrite", {"todos": todos}), answer("before sharing", chunks=2), slow]
    )
    async with web(tmp_path, llm=llm, password="pw") as w:
        sid = await w.session()
        await w.open(sid)
        await w.page.type("#prompt-text", "first")
        await w.page.click("#send")
        await w.page.until("document.querySelectorAll('#messages .assistant .usage').length === 2")
        # the todo list, drawn from the live todo.updated
        todo = "document.getElementById('todos').hidden === false && document.getElementById('todos').innerText"
        shown = await w.page.until(todo)
        assert shown.splitlines() == ["Todo: 1 of 2 done"]  # collapsed
        await w.page.click("#todos summary")
        assert (await w.page.evaluate(todo)).splitlines() == [
            "Todo: 1 of 2 done",
            "☑ read <b>it</b>",
            "▶ write it",
        ]
        await w.page.click("#share")
        url = await w.page.until("document.getElementById('share-link')?.href")
        assert url.startswith(f"{w.g.url}/s/{sid}/")
        info = (await w.client.get(f"/api/session/{sid}")).json()["data"]
        assert info["share"]["url"] == url  # stored with the session

        reader = await w.browser.new_page(context=await w.browser.new_context())
        await reader.goto(url)
        await reader.until(f"document.body.dataset.session === '{sid}'")
        await reader.until("document.getElementById('conn').dataset.state === 'live'")
        texts = await reader.evaluate(
            "[...document.querySelectorAll('#messages .text')].map(t => t.textContent)"
        )
        assert texts == ["first", "before sharing"]
        # the todo list, read from the link's todo route
        await reader.click("#todos summary")
        assert (await reader.until(todo)).splitlines()[1:] == ["☑ read <b>it</b>", "▶ write it"]
        for gone in ("#prompt-text", "#sessions", "#share", "#unshare", "#messages .undo"):
            assert await reader.evaluate(f"document.querySelector('{gone}')") is None, gone
        async with httpx.AsyncClient() as anyone:  # the rest of the API wants the password
            assert (await anyone.get(f"{w.g.url}/api/session/{sid}")).status_code == 401
            assert (await anyone.get(url + "api/session")).status_code == 200

        await w.page.type("#prompt-text", "now slowly")
        await w.page.click("#send")
        live = await reader.until(
            "document.querySelector('#messages .assistant:last-child .text.live')?.textContent"
        )
        assert live == "streaming <b>half</b>, "  # while the provider holds the rest
        assert await reader.evaluate("document.querySelectorAll('#messages .text b').length") == 0
        await reader.until("document.querySelector('#session-head .badge').textContent === 'busy'")
        llm.release.set()
        done = await reader.until(
            "document.querySelector('#session-head .badge').textContent === 'idle'"
            " && document.querySelector('#messages .assistant:last-child .usage')"
            " && document.querySelector('#messages .assistant:last-child .text').textContent"
        )
        assert done == "streaming <b>half</b>, and the rest"
        await reader.screenshot(tmp_path / "shared.png")

        await w.page.click("#unshare")
        await w.page.until("document.getElementById('share')")
        said = await reader.until(
            "document.getElementById('conn').dataset.state === 'closed'"
            " && document.getElementById('empty').textContent"
        )
        assert said == "This session is no longer shared."
        assert await reader.evaluate("document.getElementById('session').hidden") is True
        status = await reader.evaluate("fetch(location.href).then(r => r.status)")
        assert status == 404
        assert "share" not in (await w.client.get(f"/api/session/{sid}")).json()["data"]
        with trio.fail_after(5):
            await w.g.rt.sessions.wait_idle(sid)
        assert reader.exceptions == [], reader.exceptions
        assert reader.policy_violations() == [], reader.policy_violations()
