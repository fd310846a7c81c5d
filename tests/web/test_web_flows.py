"""The web app's flows in Chromium against a served runtime and the scripted model: a typed
prompt streaming its answer, abort, tool calls with their output and diff, a permission
answered by a click, a question answered inline, step failures, compaction, undo, new
sessions, and the session list."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from runtime.agents import BUILTIN_AGENTS, AgentInfo, PermissionRule
from runtime.agents._agent import compose_rules
from runtime.llm import (
    ProviderError,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
)
from tests.gateway.conftest import answer
from tests.web.conftest import HOLD, HeldLLM, call, web

CAREFUL = AgentInfo(
    name="careful", permission=compose_rules((), (PermissionRule(permission="bash", action="ask"),))
)
AGENTS = {**BUILTIN_AGENTS, "careful": CAREFUL}


async def test_a_typed_prompt_streams_its_answer_and_abort_stops_it(tmp_path: Path) -> None:
    slow = [
        StepStart(), TextStart(id="t1"), TextDelta(id="t1", delta="the first half, "), HOLD,
        TextDelta(id="t1", delta="never sent"), TextEnd(id="t1"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ]  # fmt: skip
    llm = HeldLLM([answer("a quick answer", chunks=3), slow])
    async with web(tmp_path, llm=llm) as w:
        sid = await w.session()
        await w.open(sid)
        await w.page.type("#prompt-text", "say something")
        await w.page.click("#send")
        await w.page.until("document.querySelector('#messages .assistant .usage')")
        assert await w.messages() == [
            await w.page.evaluate("document.querySelector('#messages .user').innerText"),
            await w.page.evaluate("document.querySelector('#messages .assistant').innerText"),
        ]
        texts = await w.page.evaluate(
            "[...document.querySelectorAll('#messages .text')].map(t => t.textContent)"
        )
        assert texts == ["say something", "a quick answer"]
        usage = await w.page.evaluate("document.querySelector('#messages .usage').textContent")
        assert usage.startswith("tokens in 3 · out 2") and usage.endswith("· stop")
        assert await w.page.evaluate("document.getElementById('prompt-text').value") == ""

        await w.page.type("#prompt-text", "now slowly")
        await w.page.click("#send")
        live = await w.page.until(
            "document.querySelector('#messages .assistant:last-child .text.live')?.textContent"
        )
        assert live == "the first half, "  # streamed: shown before the step ended
        await w.page.until("document.querySelector('#session-head .badge').textContent === 'busy'")
        assert await w.page.evaluate("document.getElementById('abort').disabled") is False
        await w.page.click("#abort")
        await w.page.until("document.querySelector('#session-head .badge').textContent === 'idle'")
        await w.page.until("document.querySelector('#messages .assistant:last-child .usage')")
        last = await w.page.evaluate(
            "document.querySelector('#messages .assistant:last-child').innerText"
        )
        assert "never sent" not in last and "interrupted" in last
        await w.g.rt.sessions.wait_idle(sid)
        assert not llm.release.is_set()


async def test_tool_calls_show_input_output_diff_and_a_permission_answered_by_a_click(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM([
        [StepStart(), ReasoningStart(id="r1"), ReasoningDelta(id="r1", delta="plan: edit, then run"),
         ReasoningEnd(id="r1"), *call("c1", "edit", {"filePath": "a.txt", "oldString": "two", "newString": "2"})[1:]],
        call("c2", "shell", {"command": "echo approved > proof.txt && echo ran"}),
        answer("all done"),
    ])  # fmt: skip
    async with web(tmp_path, llm=llm, agents=AGENTS) as w:
        (w.work / "a.txt").write_text("one\ntwo\nthree\n")
        sid = await w.session(agent="careful")
        await w.open(sid)
        await w.page.type("#prompt-text", "change it")
        await w.page.click("#send")
        request = await w.page.until("document.querySelector('#requests .permission')?.innerText")
        assert "bash" in request and "echo approved > proof.txt && echo ran" in request
        assert not (w.work / "proof.txt").exists()
        edit = await w.page.evaluate(
            "(() => { const t = document.querySelector('#messages details.tool');"
            " return {status: t.querySelector('.badge').textContent, title: t.querySelector('.title').textContent,"
            " add: [...t.querySelectorAll('pre.diff .add')].map(s => s.textContent),"
            " del: [...t.querySelectorAll('pre.diff .del')].map(s => s.textContent),"
            " open: t.open}; })()"
        )
        assert edit == {
            "status": "completed",
            "title": "a.txt",
            "add": ["+2\n"],
            "del": ["-two\n"],
            "open": False,
        }
        reasoning = await w.page.evaluate(
            "document.querySelector('#messages details.reasoning').open"
        )
        assert reasoning is False  # collapsed
        await w.page.click("#requests .permission button.allow")
        await w.page.until(
            "[...document.querySelectorAll('#messages .text')].some(t => t.textContent === 'all done')"
        )
        assert (w.work / "proof.txt").read_text() == "approved\n"
        shell = await w.page.evaluate(
            "(() => { const t = [...document.querySelectorAll('#messages details.tool')][1];"
            " return [t.querySelector('.badge').textContent, t.querySelector('pre.output').textContent,"
            " t.querySelector('pre.input').textContent]; })()"
        )
        assert shell[0] == "completed" and "ran" in shell[1] and "echo approved" in shell[2]
        await w.page.until("document.querySelectorAll('#requests .permission').length === 0")


async def test_a_question_is_answered_inline(tmp_path: Path) -> None:
    color = {"question": "Which color?", "header": "Color", "options": [
        {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]}  # fmt: skip
    llm = ScriptedLLM([call("q1", "question", {"questions": [color]}), answer("blue it is")])
    async with web(tmp_path, llm=llm) as w:
        sid = await w.session()
        await w.open(sid)
        await w.page.type("#prompt-text", "ask me")
        await w.page.click("#send")
        asked = await w.page.until("document.querySelector('#requests .question')?.innerText")
        assert "Which color?" in asked and "Red" in asked
        await w.page.click("#requests .question input[value='Blue']")
        await w.page.click("#requests .question button[type='submit']")
        await w.page.until(
            "[...document.querySelectorAll('#messages .text')].some(t => t.textContent === 'blue it is')"
        )
        await w.page.until("document.querySelectorAll('#requests .question').length === 0")
        prompt = llm.requests[-1].messages[-1]
        assert "Blue" in str(prompt)


async def test_a_failed_step_shows_the_providers_message(tmp_path: Path) -> None:
    refused = [
        StepStart(),
        ProviderError(kind="terminal", message="model overloaded: try <later>", status=400),
    ]
    async with web(tmp_path, llm=ScriptedLLM([refused])) as w:
        sid = await w.session()
        await w.open(sid)
        await w.page.type("#prompt-text", "hello")
        await w.page.click("#send")
        shown = await w.page.until("document.querySelector('#messages .step-error')?.textContent")
        assert "model overloaded: try <later>" in shown
        head = await w.page.until(
            "document.querySelector('#session-head .step-error')?.textContent"
        )
        assert "model overloaded" in head


async def test_compaction_undo_and_redo_show_in_the_timeline(tmp_path: Path) -> None:
    def script(request):  # the summary request, or an answer numbered by the history's length
        return answer(f"answer {len(request.messages)}")

    async with web(tmp_path, llm=ScriptedLLM(script)) as w:
        sid = await w.session()
        for text in ("first", "second"):
            await w.client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
            await w.client.post(f"/api/session/{sid}/wait")
        await w.open(sid)
        assert len(await w.messages()) == 4
        assert (await w.client.post(f"/api/session/{sid}/compact")).status_code == 204
        await w.client.post(f"/api/session/{sid}/wait")
        divider = await w.page.until(
            "document.querySelector('#messages .compaction .divider')?.textContent"
        )
        assert divider.startswith("Compacted (manual)")
        await w.page.evaluate(
            "[...document.querySelectorAll('#messages .user .undo')].at(-1).click()"
        )
        await w.page.until("document.querySelector('#session-head .revert')")
        texts = await w.page.until(
            "(() => { const t = [...document.querySelectorAll('#messages .user .text')].map(e => e.textContent);"
            " return t.length === 1 && t; })()"
        )
        assert texts == ["first"]
        await w.page.click("#session-head .revert button")  # Redo
        texts = await w.page.until(
            "(() => { const t = [...document.querySelectorAll('#messages .user .text')].map(e => e.textContent);"
            " return t.length === 2 && t; })()"
        )
        assert texts == ["first", "second"]


async def test_new_sessions_and_the_list_grouped_searched_and_busy(tmp_path: Path) -> None:
    llm = HeldLLM([[StepStart(), HOLD, *answer("late")[1:]]])
    async with web(tmp_path, llm=llm) as w:
        other = tmp_path / "other <dir>"
        other.mkdir()
        await w.session(title="alpha one")
        await w.session(directory=other, title="beta two")
        await w.page.evaluate("document.getElementById('new-dir').value = '/no/such/dir'")
        await w.page.click("#new-session button")
        error = await w.page.until(
            "!document.getElementById('side-error').hidden && document.getElementById('side-error').textContent"
        )
        assert error.startswith("InvalidRequestError:")
        await w.page.evaluate(f"document.getElementById('new-dir').value = {str(other)!r}")
        await w.page.click("#new-session button")
        created = await w.page.until("document.body.dataset.session")
        info = (await w.client.get(f"/api/session/{created}")).json()["data"]
        assert info["location"]["directory"] == str(other)
        want = sorted([[str(other), 2], [str(w.work), 1]])
        groups = await w.page.until(
            "(() => { const g = [...document.querySelectorAll('#sessions .group')].map(g =>"
            " [g.querySelector('h3').textContent, g.querySelectorAll('li').length]);"
            f" return JSON.stringify(g.sort()) === {json.dumps(json.dumps(want, separators=(',', ':')))} && g; }})()"
        )
        assert sorted(groups) == want
        await w.page.type("#search", "beta")
        shown = await w.page.until(
            "(() => { const t = [...document.querySelectorAll('#sessions .title')].map(e => e.textContent);"
            " return t.length === 1 && t; })()"
        )
        assert shown == ["beta two"]
        await w.page.evaluate(
            "document.getElementById('search').value = ''; document.getElementById('search').dispatchEvent(new Event('input'))"
        )
        await w.client.post(f"/api/session/{created}/prompt", json={"prompt": {"text": "wait"}})
        await w.page.until(
            f"document.querySelector('#sessions li[data-id=\"{created}\"] .dot.busy')"
        )
        llm.release.set()
        await w.page.until(
            f"document.querySelector('#sessions li[data-id=\"{created}\"] .dot.idle')"
        )
        with trio.fail_after(10):
            await w.g.rt.sessions.wait_idle(created)


async def test_a_prompt_queued_while_busy_waits_below_then_runs_after(tmp_path: Path) -> None:
    llm = HeldLLM([[StepStart(), HOLD, *answer("first answer")[1:]], answer("second answer")])
    async with web(tmp_path, llm=llm) as w:
        sid = await w.session()
        await w.open(sid)
        await w.page.type("#prompt-text", "first")
        await w.page.click("#send")
        await w.page.until("document.getElementById('send').textContent === 'Steer'")  # busy
        await w.page.type("#prompt-text", "later")
        await w.page.click("#queue")
        waiting = await w.page.until(
            "document.querySelector('#queued .queued')?.innerText"
            " || document.getElementById('prompt-error').textContent"
            " || document.querySelector('#queued .newest')?.textContent"
        )  # the queued prompt, or what the page shows instead (an error, a window not at the end)
        assert "queued" in waiting and "later" in waiting, waiting
        llm.release.set()
        await w.page.until("document.querySelectorAll('#messages .usage').length === 2")
        await w.page.until("document.querySelectorAll('#queued .queued').length === 0")
        texts = await w.page.evaluate(
            "[...document.querySelectorAll('#messages .text')].map(t => t.textContent)"
        )
        assert texts == ["first", "first answer", "later", "second answer"]
