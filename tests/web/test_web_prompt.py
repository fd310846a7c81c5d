"""The prompt box in Chromium: the agent and model pickers switch the session, an ``@path``
mention completes from the file routes and goes with the prompt as a file part, and ``/``
completes and runs commands (the Location's and the page's own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.llm import FilePart, ScriptedLLM, UserMessage
from tests.gateway.conftest import answer
from tests.web.conftest import web


def _select(selector: str, value: str) -> str:
    return (
        f"(() => {{ const s = document.querySelector('{selector}'); s.value = '{value}';"
        " s.dispatchEvent(new Event('change')); return s.value; })()"
    )


async def test_pickers_mentions_and_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # its models are offered
    llm = ScriptedLLM([answer("read it"), answer("reviewed")])
    async with web(tmp_path, llm=llm) as w:
        (w.work / "docs").mkdir()
        (w.work / "docs" / "plan <b>.md").write_text("the plan")
        (w.work / "main.py").write_text("print(1)")
        commands = w.work / ".kittiwake" / "command"
        commands.mkdir(parents=True)
        (commands / "review.md").write_text(
            "---\ndescription: Review a file\n---\nReview $ARGUMENTS"
        )
        sid = await w.session()
        await w.open(sid)

        # agent and model pickers, from the agent and model routes
        agents = await w.page.until(
            "document.querySelectorAll('#agent option').length > 1"
            " && [...document.querySelectorAll('#agent option')].map(o => o.value)"
        )
        assert {"build", "plan"} <= set(agents)
        assert await w.page.evaluate(_select("#agent", "plan")) == "plan"
        await w.page.until(
            "[...document.querySelectorAll('#messages .note')].some(n => n.textContent === 'Agent: plan')"
        )
        model = await w.page.evaluate(
            "[...document.querySelectorAll('#model optgroup[label=anthropic] option')][0].value"
        )
        assert model.startswith("anthropic/")
        await w.page.evaluate(_select("#model", model))
        await w.page.until(
            f"[...document.querySelectorAll('#messages .note')].some(n => n.textContent === 'Model: {model}')"
        )
        info = (await w.client.get(f"/api/session/{sid}")).json()["data"]
        assert info["agent"] == "plan"
        assert f"{info['model']['providerID']}/{info['model']['id']}" == model
        assert await w.page.evaluate("document.getElementById('agent').value") == "plan"
        assert await w.page.evaluate("document.getElementById('model').value") == model

        # @path: completed from the file routes, taken with Enter, sent as a file part
        await w.page.type("#prompt-text", "look at @plan")
        offered = await w.page.until(
            "!document.getElementById('completions').hidden"
            " && [...document.querySelectorAll('#completions li .value')].map(e => e.textContent)"
        )
        assert offered[0] == "@docs/plan <b>.md"
        assert await w.page.evaluate("document.querySelectorAll('#completions b').length") == 0
        await w.page.send("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter",
                          windowsVirtualKeyCode=13)  # fmt: skip
        text = await w.page.evaluate("document.getElementById('prompt-text').value")
        assert text == "look at @docs/plan <b>.md "
        assert await w.page.evaluate("document.getElementById('completions').hidden") is True
        await w.page.click("#send")
        await w.page.until("document.querySelectorAll('#messages .assistant .usage').length === 1")
        [user] = [m for m in llm.requests[0].messages if isinstance(m, UserMessage)][-1:]
        files = [p for p in user.content if isinstance(p, FilePart)]
        assert [f.url for f in files] == [(w.work / "docs" / "plan <b>.md").as_uri()]
        assert llm.requests[0].model.provider_id == "anthropic"

        # /: the page's commands and the Location's, completed, run by Send
        await w.page.type("#prompt-text", "/")
        offered = await w.page.until(
            "!document.getElementById('completions').hidden"
            " && [...document.querySelectorAll('#completions li .value')].map(e => e.textContent)"
        )
        assert {"/share", "/unshare", "/compact", "/review"} <= set(offered)
        await w.page.type("#prompt-text", "rev")
        await w.page.until(
            "document.querySelector('#completions li .value')?.textContent === '/review'"
        )
        await w.page.send("Input.dispatchKeyEvent", type="keyDown", key="Tab", code="Tab",
                          windowsVirtualKeyCode=9)  # fmt: skip
        await w.page.type("#prompt-text", "main.py")
        assert (
            await w.page.evaluate("document.getElementById('prompt-text').value")
            == "/review main.py"
        )
        await w.page.click("#send")
        await w.page.until("document.querySelectorAll('#messages .assistant .usage').length === 2")
        texts = await w.page.evaluate(
            "[...document.querySelectorAll('#messages .user .text')].map(t => t.textContent)"
        )
        assert texts[-1].startswith("Review main.py")

        await w.page.type("#prompt-text", "/share")
        await w.page.click("#send")
        url = await w.page.until("document.getElementById('share-link')?.href")
        assert url.startswith(f"{w.g.url}/s/{sid}/")
