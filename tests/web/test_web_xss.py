"""Model output, tool input and output, and file names with markup in them render as text in
Chromium and run nothing (the model's Markdown is drawn from an allowlist of elements, its
HTML never); the page's policy refuses inline script even if some got in."""

from __future__ import annotations

from pathlib import Path

from runtime.llm import ReasoningDelta, ReasoningEnd, ReasoningStart, ScriptedLLM, StepStart
from tests.gateway.conftest import answer
from tests.web.conftest import call, web

IMG = '<img src=x onerror="window.__pwned = (window.__pwned || 0) + 1">'
SCRIPT = "<script>window.__pwned = (window.__pwned || 0) + 1;</script>"
NAME = "<img src=x onerror=window.__pwned=1>.txt"


async def test_markup_from_the_model_and_tools_is_text_and_runs_nothing(tmp_path: Path) -> None:
    raw_link = "<a href='javascript:window.__pwned=1'>x</a>"
    said = (
        f"Here: {IMG}\n```html\n{SCRIPT}\n```\n<b>bold?</b> {raw_link}\n\n"
        "**strong** [safe](https://example.com/x) [bad](javascript:window.__pwned=1) "
        '![pic](https://example.com/p.png)\n\n<div onmouseover="window.__pwned=1">block</div>\n'
    )
    llm = ScriptedLLM([
        [StepStart(), ReasoningStart(id="r1"), ReasoningDelta(id="r1", delta=SCRIPT), ReasoningEnd(id="r1"),
         *call("c1", "write", {"filePath": NAME, "content": IMG})[1:]],
        call("c2", "shell", {"command": f"printf '%s' '{SCRIPT}'"}),
        answer(said, chunks=4),
    ])  # fmt: skip
    async with web(tmp_path, llm=llm) as w:
        sid = await w.session(title=f"title {SCRIPT}")
        await w.open(sid)
        await w.page.type("#prompt-text", f"write {IMG}")
        await w.page.click("#send")
        await w.page.until(
            "document.querySelectorAll('#messages .assistant .usage').length === 3"
            " && document.querySelector('#session-head .badge').textContent === 'idle'"
        )
        await w.page.evaluate(
            "document.querySelectorAll('#messages details').forEach(d => d.open = true)"
        )
        assert (w.work / NAME).read_text() == IMG  # the file exists under that name
        texts = await w.page.evaluate(
            "[...document.querySelectorAll('#messages .text, #messages pre, #messages .title')]"
            ".map(e => e.textContent)"
        )
        assert f"write {IMG}" in texts
        assert SCRIPT in texts  # the reasoning
        assert NAME in texts  # the write call's file name
        assert SCRIPT in texts  # the shell's output
        shown = await w.page.evaluate(
            "document.querySelector('#messages .assistant:last-child .text.md').textContent"
        )
        for piece in (f"Here: {IMG}", SCRIPT, f"<b>bold?</b> {raw_link}", "strong safe bad",
                      "🖼 pic", '<div onmouseover="window.__pwned=1">block</div>'):  # fmt: skip
            assert piece in shown, piece  # the answer's HTML, as text
        for tag in ("img", "script", "iframe", "div[onmouseover]"):
            found = await w.page.evaluate(f"document.querySelectorAll('#messages {tag}').length")
            assert found == 0, tag
        # its Markdown, drawn: only http(s) links, opened apart; no image loaded
        links = await w.page.evaluate(
            "[...document.querySelectorAll('#messages a')].map(a => [a.getAttribute('href'),"
            " a.rel, a.target, a.textContent])"
        )
        rel = "noopener noreferrer nofollow"
        assert links == [
            ["https://example.com/x", rel, "_blank", "safe"],
            ["https://example.com/p.png", rel, "_blank", "🖼 pic"],
        ]
        assert await w.page.evaluate(
            "[...document.querySelectorAll('#messages .md strong, #messages .md pre code')]"
            ".map(e => e.textContent)"
        ) == [SCRIPT, "strong"]  # fmt: skip
        for tag in ("img", "script", "iframe"):  # the list's entries are links of its own
            found = await w.page.evaluate(
                f"document.querySelectorAll('#sessions {tag}, #session-head {tag}').length"
            )
            assert found == 0, tag
        assert (
            await w.page.evaluate("document.querySelector('#session-head h2').textContent")
            == f"title {SCRIPT}"
        )
        assert await w.page.evaluate("window.__pwned") is None
        assert w.page.policy_violations() == []  # nothing was even tried
        shot = await w.page.screenshot(tmp_path / "timeline.png")
        assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20_000

        # Were markup ever to get in, the policy refuses to run it.
        await w.page.evaluate(
            "(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1';"
            " document.body.append(s); const i = document.createElement('img');"
            " i.setAttribute('onerror', 'window.__inline = 2'); i.src = 'data:,x'; document.body.append(i); })()"
        )
        await w.page.until("document.readyState === 'complete'")
        refused = await w.page.evaluate(
            "new Promise(r => { let n = 0; document.addEventListener('securitypolicyviolation', () => ++n);"
            " const s = document.createElement('script'); s.textContent = 'window.__inline = 3';"
            " document.body.append(s); setTimeout(() => r(n), 0); })"
        )
        assert refused == 1
        assert await w.page.evaluate("window.__inline") is None
        assert any("Content Security Policy" in line for line in w.page.policy_violations())
        w.page.console.clear()  # the refusals planted above, not the page's
        w.page.log.clear()
