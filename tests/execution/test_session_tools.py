"""The session tools through real drains: todos, questions and plan switches, embedded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from runtime import Location, Prompt, QuestionNotFoundError, StorageError, llm, open_runtime
from runtime import messages as m
from runtime.agents import BUILD, BUILTIN_AGENTS, PermissionRule, compose_rules
from runtime.tools import PLAN_EXIT_QUESTION
from storage import Events
from tests.execution.conftest import OneFailedSync, answer, published, tool_calls

TODOS = [
    {"content": "read the code", "status": "completed", "priority": "high"},
    {"content": "write the fix", "status": "in_progress", "priority": "medium"},
]
COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
}


def tool_result(request: llm.LLMRequest) -> tuple[str, bool]:
    """The text of the last tool result in *request*, and whether it is an error."""
    results = [x for x in request.messages if isinstance(x, llm.ToolMessage)]
    part = results[-1].content[-1]
    text = "".join(p.text for p in part.content if isinstance(p, llm.TextPart))
    return text, part.is_error


async def session(rt: Any, tmp_path: Path, agent: str | None = None) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    info = await rt.sessions.create(location=Location(directory=str(work)), agent=agent)
    return str(info.id)


async def ask_and_wait(rt: Any, sid: str) -> list[Any]:
    """Prompt *sid* and wait until its question is stored; the pending questions."""
    with rt.hub.subscribe(sid) as sub:
        await rt.sessions.prompt(sid, prompt=Prompt(text="go"))
        with trio.fail_after(10):
            await published(sub, "question.v2.asked")
    return list(await rt.tools.pending_questions(sid))


async def test_todowrite_is_durable_evented_and_read_back(tmp_path: Path) -> None:
    client = llm.ScriptedLLM(
        [
            tool_calls(("c1", "todowrite", {"todos": TODOS})),
            tool_calls(("c2", "todoread", {})),
            answer(),
        ]
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = await session(rt, tmp_path)
        assert await rt.tools.todos(sid) == []
        with rt.hub.subscribe(sid) as sub:
            await rt.sessions.prompt(sid, prompt=Prompt(text="plan it"))
            with trio.fail_after(10):
                await published(sub, "todo.updated")
        await rt.sessions.wait_idle(sid)
        text, error = tool_result(client.requests[2])
        assert not error and "write the fix" in text and "in_progress" in text
        stored = await rt.storage.read(Events(session_id=sid, after=-1, limit=500))
        assert [e.type for e in stored].count("todo.updated") == 1
        assert "todowrite" in [t.name for t in client.requests[0].tools]
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        todos = await rt.tools.todos(sid)
        assert [(t.content, t.status, t.priority) for t in todos] == [
            ("read the code", "completed", "high"),
            ("write the fix", "in_progress", "medium"),
        ]


async def test_question_blocks_until_answered(tmp_path: Path) -> None:
    client = llm.ScriptedLLM(
        [tool_calls(("c1", "question", {"questions": [COLOR]})), answer("blue it is")]
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = await session(rt, tmp_path)
        [asked] = await ask_and_wait(rt, sid)
        assert asked.questions[0].header == "Color" and asked.tool.call_id == "c1"
        assert len(client.requests) == 1  # the turn waits
        with pytest.raises(Exception, match="takes one of|one answer"):
            await rt.tools.reply_question(sid, asked.id, [["Red", "Blue"]])
        await rt.tools.reply_question(sid, asked.id, [["Blue"]])
        await rt.sessions.wait_idle(sid)
        text, error = tool_result(client.requests[1])
        assert not error and '"Which color?"="Blue"' in text
        assert await rt.tools.pending_questions(sid) == []
        with pytest.raises(QuestionNotFoundError):
            await rt.tools.reply_question(sid, asked.id, [["Red"]])


async def test_rejected_question_reaches_the_model_as_a_rejection(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "question", {"questions": [COLOR]})), answer("ok")])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = await session(rt, tmp_path)
        [asked] = await ask_and_wait(rt, sid)
        await rt.tools.reject_question(sid, asked.id)
        await rt.sessions.wait_idle(sid)
        text, error = tool_result(client.requests[1])
        assert error and "dismissed" in text


async def test_pending_question_survives_a_restart_and_its_answer_reaches_the_model(
    tmp_path: Path,
) -> None:
    client = llm.ScriptedLLM(
        [tool_calls(("c1", "question", {"questions": [COLOR]})), answer("noted")]
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = await session(rt, tmp_path)
        [asked] = await ask_and_wait(rt, sid)
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        [still] = await rt.tools.pending_questions()
        assert still.id == asked.id and still.session_id == sid
        await rt.tools.reply_question(None, asked.id, [["Red"]])
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 2
        users = [
            p.text
            for msg in client.requests[1].messages
            if isinstance(msg, llm.UserMessage)
            for p in msg.content
            if isinstance(p, llm.TextPart)
        ]
        assert '"Which color?"="Red"' in users[-1]
        text, error = tool_result(client.requests[1])
        assert error and "interrupted" in text  # the cut call never ran twice


async def test_plan_exit_after_approval_switches_to_build_from_the_next_turn(
    tmp_path: Path,
) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "plan_exit", {})), answer("building")])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = await session(rt, tmp_path, agent="plan")
        [asked] = await ask_and_wait(rt, sid)
        assert asked.questions[0].question == PLAN_EXIT_QUESTION
        assert "plan_exit" in [t.name for t in client.requests[0].tools]
        await rt.tools.reply_question(sid, asked.id, [["Yes"]])
        await rt.sessions.wait_idle(sid)
        assert (await rt.sessions.get(sid)).agent == "build"
        page = await rt.sessions.messages(sid, limit=20, order="asc")
        steps = [x.agent for x in page.data if isinstance(x, m.AssistantMessage)]
        assert steps == ["plan", "build"]
        names = [t.name for t in client.requests[1].tools]
        assert "plan_exit" not in names and "plan_enter" in names


async def test_plan_exit_declined_keeps_the_plan_agent(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "plan_exit", {})), answer("still planning")])
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = await session(rt, tmp_path, agent="plan")
        [asked] = await ask_and_wait(rt, sid)
        await rt.tools.reply_question(sid, asked.id, [["No"]])
        await rt.sessions.wait_idle(sid)
        assert (await rt.sessions.get(sid)).agent == "plan"
        text, error = tool_result(client.requests[1])
        assert error and "declined" in text


def _skills(work: Path) -> None:
    for folder, name, description in (
        (".kittiwake/skill", "testing", "How to write tests here"),
        (".claude/skills", "secret", "Not for this agent"),
    ):
        path = work / folder / name
        path.mkdir(parents=True)
        text = f"---\nname: {name}\ndescription: {description}\n---\nUse pytest for {name}.\n"
        (path / "SKILL.md").write_text(text)
    broken = work / ".opencode" / "skill" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\nname: broken\n---\nno description\n")


async def test_skill_is_listed_loaded_and_denied_by_a_rule(tmp_path: Path) -> None:
    rules = compose_rules((), [PermissionRule(permission="skill", pattern="secret", action="deny")])
    agents = {**BUILTIN_AGENTS, "build": msgspec.structs.replace(BUILD, permission=rules)}
    client = llm.ScriptedLLM(
        [
            tool_calls(("c1", "skill", {"name": "testing"})),
            tool_calls(("c2", "skill", {"name": "secret"})),
            tool_calls(("c3", "skill", {"name": "later"})),
            answer(),
        ]
    )
    work = tmp_path / "work"
    _skills(work)
    async with open_runtime(data_dir=tmp_path / "data", llm=client, agents=agents) as rt:
        sid = await session(rt, tmp_path)
        await rt.sessions.prompt(sid, prompt=Prompt(text="use skills"))
        await rt.sessions.wait_idle(sid)
        [skill] = [t for t in client.requests[0].tools if t.name == "skill"]
        assert "<name>testing</name>" in skill.description
        assert "How to write tests here" in skill.description
        assert "secret" not in skill.description and "broken" not in skill.description
        text, error = tool_result(client.requests[1])
        assert not error and text.startswith('<skill_content name="testing">')
        assert (
            "Use pytest for testing." in text and f"file://{work}/.kittiwake/skill/testing" in text
        )
        text, error = tool_result(client.requests[2])
        assert error and "Permission denied" in text and "skill on secret" in text
        text, error = tool_result(client.requests[3])
        assert error and "Unknown skill 'later'" in text


@pytest.mark.parametrize("rejected", [False, True])
async def test_an_answer_reported_failed_but_stored_reaches_the_waiting_call(
    tmp_path: Path, rejected: bool
) -> None:
    files = OneFailedSync()
    client = llm.ScriptedLLM([tool_calls(("c1", "question", {"questions": [COLOR]})), answer()])
    options: dict[str, Any] = {"journal_files": files}
    async with open_runtime(data_dir=tmp_path / "data", llm=client, store_options=options) as rt:
        sid = await session(rt, tmp_path)
        [asked] = await ask_and_wait(rt, sid)
        files.armed = True
        with pytest.raises(StorageError):
            if rejected:
                await rt.tools.reject_question(sid, asked.id)
            else:
                await rt.tools.reply_question(sid, asked.id, [["Blue"]])
        # The store restarts and replays the answer; the waiting call hears of it.
        with trio.fail_after(10):
            await rt.sessions.wait_idle(sid)
        assert rt.storage.statistics().restarts == 1
        assert await rt.tools.pending_questions(sid) == []
        with pytest.raises(QuestionNotFoundError):
            await rt.tools.reply_question(sid, asked.id, [["Red"]])
        text, error = tool_result(client.requests[1])
        if rejected:
            assert error and "dismissed" in text
        else:
            assert not error and '"Which color?"="Blue"' in text
        assert len(client.requests) == 2  # no prompt with the answers: the call had them
