"""The ``task`` tool through real drains: subagent child sessions, resume, interrupt, limits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from actors.session._questions import late_answer
from runtime import AssistantMessage, Location, Prompt, UserMessage, derived_id, llm, open_runtime
from runtime import events as ev
from runtime import messages as m
from storage import Append, EventsOfType, EventStore
from tests.execution.conftest import answer, eventually, running, tool_calls, user_texts

_TASK_CHILD = Path(__file__).with_name("task_child.py")


def task(call_id: str, prompt: str, agent: str = "explore", **extra: Any) -> tuple[str, str, dict]:
    return (call_id, "task", {"description": "look around", "prompt": prompt,
                              "subagent_type": agent, **extra})  # fmt: skip


def results(request: llm.LLMRequest) -> list[tuple[str, bool]]:
    """(text, is_error) of every tool result in *request*, in order."""
    return [
        ("".join(p.text for p in part.content if isinstance(p, llm.TextPart)), part.is_error)
        for message in request.messages
        if isinstance(message, llm.ToolMessage)
        for part in message.content
    ]


def scripted(
    parent: Sequence[Sequence[llm.LLMEvent]], child: dict[str, Sequence[llm.LLMEvent]]
) -> llm.ScriptedLLM:
    """A provider answering child sessions by their latest prompt's text (*child*), and the
    parent with its scripts in order."""
    turns = iter(parent)

    def script(request: llm.LLMRequest) -> Sequence[llm.LLMEvent]:
        texts = user_texts(request)
        if texts and texts[-1] in child and not _answered(request):
            return child[texts[-1]]
        return next(turns)

    return llm.ScriptedLLM(script)


def _answered(request: llm.LLMRequest) -> bool:
    return isinstance(request.messages[-1], llm.ToolMessage)


async def test_task_runs_a_subagent_child_and_resumes_it(tmp_path: Path) -> None:
    client = scripted(
        [
            tool_calls(task("c1", "find the bug")),
            answer("thanks"),
            [],  # replaced below, once the child's id is known
            answer("thanks again"),
        ],
        {"find the bug": answer("it is in foo.py"), "and the fix?": answer("swap the args")},
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        work = tmp_path / "work"
        work.mkdir()
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        await rt.sessions.prompt(sid, prompt=Prompt(text="delegate"))
        await rt.sessions.wait_idle(sid)
        [child] = await rt.sessions.children(sid)
        assert child.agent == "explore" and child.parent_id == sid
        assert child.title == "look around (@explore subagent)"
        text, error = results(client.requests[2])[-1]
        assert not error and text.startswith(f"task_id: {child.id}")
        assert "<task_result>\nit is in foo.py\n</task_result>" in text
        offered = {t.name for t in client.requests[1].tools}  # the child's request
        assert "task" not in offered and "edit" not in offered and "read" in offered
        task_tool = next(t for t in client.requests[0].tools if t.name == "task")
        assert "- explore:" in task_tool.description and "- general:" in task_tool.description

        # A later call with the task_id continues the same child session.
        resume = tool_calls(task("c2", "and the fix?", task_id=child.id))
        client._scripts = _replace_parent(client, resume)
        await rt.sessions.prompt(sid, prompt=Prompt(text="ask it again"))
        await rt.sessions.wait_idle(sid)
        assert [c.id for c in await rt.sessions.children(sid)] == [child.id]
        child_request = client.requests[4]
        assert user_texts(child_request) == ["find the bug", "and the fix?"]
        assert "swap the args" in results(client.requests[5])[-1][0]

        foreign = tool_calls(task("c3", "x", task_id=sid))
        client._scripts = _replace_parent(client, foreign, answer("ok"))
        await rt.sessions.prompt(sid, prompt=Prompt(text="misuse"))
        await rt.sessions.wait_idle(sid)
        text, error = results(client.requests[-1])[-1]
        assert error and "not a task of this session" in text


def _replace_parent(client: llm.ScriptedLLM, *turns: Sequence[llm.LLMEvent]) -> Any:
    """A script function serving *turns* to the parent next (children as before)."""
    previous = client._scripts
    queue = list(turns)

    def script(request: llm.LLMRequest) -> Sequence[llm.LLMEvent]:
        texts = user_texts(request)
        if texts and texts[-1] in ("find the bug", "and the fix?") and not _answered(request):
            return previous(request)  # type: ignore[operator]
        return queue.pop(0) if queue else answer("thanks again")

    return script


async def test_unknown_subagent_fails_the_call(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(task("c1", "x", agent="build")), answer()])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        work = tmp_path / "work"
        work.mkdir()
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        await rt.sessions.prompt(sid, prompt=Prompt(text="delegate"))
        await rt.sessions.wait_idle(sid)
        text, error = results(client.requests[1])[-1]
        assert error and "Unknown subagent 'build'" in text and "explore" in text
        assert await rt.sessions.children(sid) == []


async def test_interrupting_the_parent_interrupts_its_child(tmp_path: Path) -> None:
    client = scripted(
        [tool_calls(task("c1", "wait", agent="general"))],
        {"wait": tool_calls(("g1", "gated", {"key": "never"}))},
    )
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=Prompt(text="delegate"))
        await eventually(lambda: rt.test_gates.started == ["never"])
        [child] = await rt.sessions.children(sid)
        assert set(rt.sessions.active()) >= {sid, child.id}
        await rt.sessions.interrupt(sid)
        with trio.fail_after(10):
            await rt.sessions.wait_idle(child.id)
        history = (await rt.sessions.messages(child.id, order="asc")).data
        tools = [
            p
            for x in history
            if isinstance(x, AssistantMessage)
            for p in x.content
            if isinstance(p, m.AssistantTool)
        ]
        assert tools[0].state.error.message == "Tool execution interrupted"
        assert rt.tools.tasks_running == 0


async def test_children_of_one_session_run_within_the_limit(tmp_path: Path) -> None:
    client = scripted(
        [tool_calls(task("c1", "first"), task("c2", "second")), answer("both done")],
        {
            "first": tool_calls(("g1", "gated", {"key": "a"})),
            "second": tool_calls(("g2", "gated", {"key": "b"})),
        },
    )
    child_answers = iter([answer("one"), answer("two")])
    inner = client._scripts

    def script(request: llm.LLMRequest) -> Sequence[llm.LLMEvent]:
        if _answered(request) and user_texts(request)[-1] in ("first", "second"):
            return next(child_answers)
        return inner(request)  # type: ignore[operator]

    client._scripts = script
    async with running(tmp_path, client, max_tasks=1) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=Prompt(text="delegate twice"))
        await eventually(lambda: len(rt.test_gates.started) == 1)
        await trio.testing.wait_all_tasks_blocked()
        assert rt.tools.tasks_running == 1 and len(rt.test_gates.started) == 1
        first = rt.test_gates.started[0]
        rt.test_gates.open(first)
        await eventually(lambda: len(rt.test_gates.started) == 2)
        rt.test_gates.open(rt.test_gates.started[1])
        await rt.sessions.wait_idle(sid)
        texts = [t for t, error in results(client.requests[-1]) if not error]
        assert len(texts) == 2 and all("<task_result>" in t for t in texts)


def _run_until_child_tool(data: Path, work: Path, mode: str = "task") -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, str(_TASK_CHILD), str(data), str(work), mode],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stdout.close()
    assert line.startswith("ASKED" if mode == "question" else "TOOL"), line


async def test_sigkill_mid_task_recovers_both_sessions_and_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    await trio.to_thread.run_sync(_run_until_child_tool, data, work)
    client = llm.ScriptedLLM([])
    async with running(tmp_path, client) as rt:
        [child] = await rt.sessions.children("ses_parent")
        assert child.agent == "general"
        assert sorted(await rt.sessions.needs_resume()) == sorted(["ses_parent", child.id])
        for sid in ("ses_parent", child.id):
            history = (await rt.sessions.messages(sid, order="asc")).data
            cut = [x for x in history if isinstance(x, AssistantMessage)]
            assert cut[-1].finish == "interrupted"
            [tool] = [p for p in cut[-1].content if isinstance(p, m.AssistantTool)]
            assert tool.state.error.message == "Tool execution interrupted"
        await trio.testing.wait_all_tasks_blocked()
        assert client.requests == [] and rt.test_gates.started == []


async def _killed_asking(tmp_path: Path) -> Path:
    """The data dir of a process SIGKILLed while ``ses_parent``'s question waits."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    await trio.to_thread.run_sync(_run_until_child_tool, data, work, "question")
    return data


async def test_sigkill_leaves_a_pending_question_answerable_after_restart(tmp_path: Path) -> None:
    await _killed_asking(tmp_path)
    client = llm.ScriptedLLM([answer("red it is")])
    async with running(tmp_path, client) as rt:
        [asked] = await rt.tools.pending_questions("ses_parent")
        assert asked.questions[0].header == "Color" and asked.tool.call_id == "q1"
        assert await rt.sessions.needs_resume() == ["ses_parent"]
        await rt.tools.reply_question("ses_parent", asked.id, [["Red"]])
        await rt.sessions.wait_idle("ses_parent")
        [request] = client.requests
        assert '"Which color?"="Red"' in user_texts(request)[-1]
        assert results(request) == [("Tool execution interrupted", True)]
        assert await rt.tools.pending_questions() == []


def _answer_in_the_store(
    data: Path, answers: list[list[str]], *, admitted: bool
) -> ev.QuestionReplied:
    """Record a reply to ``ses_parent``'s pending question straight in its store, as another
    worker does while the asking process is dead and not yet recovered; with *admitted*,
    also its late answer, as a recovery cut after that admission leaves it."""
    store = EventStore.open(data)
    try:
        events = [ev.decode_event(stored.data) for stored in store.all_events()]
        [asked] = [e for e in events if isinstance(e, ev.QuestionAsked)]
        replied = ev.QuestionReplied(
            timestamp=asked.timestamp + 1, session_id="ses_parent", request_id=asked.id,
            answers=answers,
        )  # fmt: skip
        ops: list[Any] = [Append(session_id="ses_parent", events=[replied])]
        if admitted:
            ops.append(late_answer(asked, replied, replied.timestamp))
        outcomes, _ = store.write_batch(ops)
        assert [o.error for o in outcomes] == [None] * len(ops)
    finally:
        store.close()
    return replied


@pytest.mark.parametrize("admitted", [False, True], ids=["answered", "answered-and-admitted"])
async def test_an_answer_recorded_before_recovery_reaches_the_model_once(
    tmp_path: Path, admitted: bool
) -> None:
    """The asking process died and the answer was recorded before any recovery (through
    another worker): start-up recovery closes the call and admits the answers as a prompt,
    which runs once, also when an earlier recovery admitted it and was cut."""
    data = await _killed_asking(tmp_path)
    replied = await trio.to_thread.run_sync(
        lambda: _answer_in_the_store(data, [["Blue"]], admitted=admitted)
    )
    client = llm.ScriptedLLM([answer("blue it is")])
    async with running(tmp_path, client) as rt:
        await eventually(lambda: len(client.requests) == 1)
        await rt.sessions.wait_idle("ses_parent")
        [request] = client.requests
        assert user_texts(request)[-1] == (
            'Answers to the questions asked before the interruption: "Which color?"="Blue".'
        )
        assert results(request) == [("Tool execution interrupted", True)]
        assert await rt.tools.pending_questions() == []
        assert await rt.sessions.needs_resume() == []
        history = (await rt.sessions.messages("ses_parent", order="asc")).data
        prompts = [x.id for x in history if isinstance(x, UserMessage)]
        assert prompts[1:] == [derived_id("msg", replied.timestamp, replied.request_id)]


async def test_an_answer_after_a_revert_commits_it_as_a_prompt_does(tmp_path: Path) -> None:
    """The user reverted the session past the question a crash left pending, then answered
    it: as for any prompt, the revert is committed first (``session.revert.committed``
    names the dropped messages, which OpenCode's clients hear as ``message.removed``), and
    the late answer and its reply show."""
    await _killed_asking(tmp_path)
    client = llm.ScriptedLLM([answer("red it is")])
    async with running(tmp_path, client) as rt:
        [asked] = await rt.tools.pending_questions("ses_parent")
        before = (await rt.sessions.messages("ses_parent", order="asc")).data
        await rt.sessions.reverts.revert("ses_parent", before[-1].id, files=False)
        await rt.tools.reply_question("ses_parent", asked.id, [["Red"]])
        await rt.sessions.wait_idle("ses_parent")
        [request] = client.requests
        assert user_texts(request)[-1].endswith('"Which color?"="Red".')
        committed = await rt.storage.read(
            EventsOfType(types=["session.revert.committed"], session_id="ses_parent", limit=5)
        )
        assert [ev.decode_event(e.data).message_ids for e in committed] == [[before[-1].id]]
        shown = (await rt.sessions.messages("ses_parent", order="asc")).data
        assert [type(x) for x in shown] == [UserMessage, UserMessage, AssistantMessage]
        assert shown[0].id == before[0].id
        assert (await rt.sessions.get("ses_parent")).revert is msgspec.UNSET
