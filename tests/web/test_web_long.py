"""A session of 10,000 messages opens on its newest page and scrolls back to its oldest, the
DOM holding a bounded window of them all the way."""

from __future__ import annotations

from pathlib import Path

from runtime.llm import ScriptedLLM
from tests.gateway.conftest import answer
from tests.web.conftest import long_session, web

IDS = "[...document.querySelectorAll('#messages .msg')].map(m => m.dataset.id)"
# A reader holding the scrollbar at the top: every message passes through the window.
TO_OLDEST = """(async () => {
  const t = document.getElementById('timeline'), older = document.getElementById('older');
  const seen = new Set();
  let frames = 0, most = 0, twice = 0;
  while (older.textContent !== 'Start of the session' || t.scrollTop > 0) {
    t.scrollTop = 0;
    await new Promise((r) => requestAnimationFrame(r));
    const ids = [...document.querySelectorAll('#messages .msg')].map((m) => m.dataset.id);
    if (new Set(ids).size !== ids.length) twice += 1;
    ids.forEach((id) => seen.add(id));
    most = Math.max(most, ids.length);
    frames += 1;
  }
  return {frames, seen: seen.size, most, twice};
})()"""


async def _all_ids(client, sid: str) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        query = {"limit": 200, **({"cursor": cursor} if cursor else {"order": "asc"})}
        page = (await client.get(f"/api/session/{sid}/message", params=query)).json()
        ids += [m["id"] for m in page["data"]]
        cursor = page["cursor"].get("next")
        if cursor is None:
            return ids


async def test_ten_thousand_messages_open_on_a_window_and_page_back_to_the_oldest(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM(lambda request: answer("ok"), event_checkpoints=False)
    async with web(tmp_path, llm=llm) as w:
        sid = await long_session(w.g.rt, w.work, rounds=10)
        every = await _all_ids(w.client, sid)
        assert len(every) >= 10_000
        page = await w.page.browser.new_page()  # a tab of its own: none of the writing above
        await page.goto(f"{w.g.url}/#/session/{sid}")
        await page.until(f"document.body.dataset.session === '{sid}'")
        assert await page.evaluate(IDS) == every[-50:]  # the newest page only
        walk = await page.evaluate(TO_OLDEST)
        assert walk["seen"] == len(every) and walk["twice"] == 0, walk
        assert walk["most"] <= 300  # the window
        shown = await page.evaluate(IDS)
        assert shown[:3] == every[:3]
        texts = await page.evaluate(
            "[...document.querySelectorAll('#messages .msg .text')].slice(0, 2).map(t => t.textContent)"
        )
        assert all(text.startswith("p0.") for text in texts)
        await page.click("#queued button.newest")
        await page.until(f"{IDS}.at(-1) === {every[-1]!r}")
        assert page.exceptions == [] and page.policy_violations() == []
