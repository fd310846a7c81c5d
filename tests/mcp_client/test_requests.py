"""A server's requests of the client during a tool call, through real sessions: its roots
(the Location), elicitation (a durable question of the session, answered over OpenCode's
routes, surviving a restart) and sampling (the session's model, under ``mcp_sampling``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from runtime.llm import ScriptedLLM, TextPart, ToolMessage, UserMessage
from tests.execution.conftest import answer, prompt, tool_calls
from tests.gateway.conftest import assert_valid, response_schema
from tests.mcp_client.conftest import connected, local, mcp_runtime, new_session
from tests.mcp_client.test_routes import served
from tests.waiting import eventually, published


def last_result(request) -> tuple[str, bool]:
    """The text of the last tool result the provider was sent, and whether it failed."""
    (result,) = [p for x in request.messages if isinstance(x, ToolMessage) for p in x.content][-1:]
    return "".join(c.text for c in result.content if isinstance(c, TextPart)), result.is_error


async def test_the_servers_root_is_the_location(tmp_path: Path):
    client = ScriptedLLM([tool_calls(("c1", "test_roots", {})), answer("rooted")])
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("roots?"))
        await rt.sessions.wait_idle(sid)
    text, failed = last_result(client.requests[1])
    assert (text, failed) == (work.as_uri(), False)


async def _order(http: httpx.AsyncClient, rt, sid: str, reply: list[list[str]] | None) -> dict:
    """Wait for the order's question, check its shape, reply (None: reject)."""
    with rt.hub.subscribe(sid) as sub:
        await rt.sessions.prompt(sid, prompt=prompt("order"))
        await published(sub, "question.v2.asked")
    listed = (await http.get("/question")).json()
    assert_valid(listed, response_schema("/question", "get", 200))
    (asked,) = listed
    if reply is None:
        done = await http.post(f"/question/{asked['id']}/reject")
    else:
        done = await http.post(f"/question/{asked['id']}/reply", json={"answers": reply})
    assert done.status_code == 200, done.text
    await rt.sessions.wait_idle(sid)
    return asked


async def test_an_elicitation_is_a_question_of_the_session_and_its_answers_go_back(
    tmp_path: Path,
):
    client = ScriptedLLM([
        tool_calls(("c1", "test_order", {})), answer("ordered"),
        tool_calls(("c2", "test_order", {})), answer("declined"),
        tool_calls(("c3", "test_order", {})), answer("dismissed"),
    ])  # fmt: skip
    async with served(tmp_path, {"mcp": {"test": local()}}, client) as (rt, url):
        sid = await new_session(rt, tmp_path / "project")
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            answers = [["Accept"], ["lemon"], ["2"], ["Yes"], []]
            asked = await _order(http, rt, sid, answers)
            await _order(http, rt, sid, [["Decline"], [], [], [], []])
            await _order(http, rt, sid, None)
    questions: list[dict[str, Any]] = asked["questions"]
    assert asked["sessionID"] == sid and asked["tool"]["callID"] == "c1"
    assert [q["header"] for q in questions] == ["test asks", "Flavour", "Scoops", "Cone", "Note"]
    assert questions[0]["question"] == "What would you like?"
    assert [o["label"] for o in questions[0]["options"]] == ["Accept", "Decline"]
    assert [o["label"] for o in questions[1]["options"]] == ["vanilla", "lemon"]
    assert questions[2]["question"] == "How many scoops? (required)"
    assert questions[2]["options"] == [] and "custom" not in questions[2]
    assert [o["label"] for o in questions[3]["options"]] == ["Yes", "No"]
    accepted = json.loads(last_result(client.requests[1])[0])
    assert accepted == {"action": "accept",
                        "content": {"flavour": "lemon", "scoops": 2, "cone": True}}  # fmt: skip
    assert json.loads(last_result(client.requests[3])[0]) == {"action": "decline"}
    assert json.loads(last_result(client.requests[5])[0]) == {"action": "cancel"}


async def test_an_elicitation_left_pending_by_a_restart_is_answered_after_it(tmp_path: Path):
    config = {"mcp": {"test": local()}}
    client = ScriptedLLM([tool_calls(("c1", "test_order", {}))])
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        with rt.hub.subscribe(sid) as sub:
            await rt.sessions.prompt(sid, prompt=prompt("order"))
            await published(sub, "question.v2.asked")
    later = ScriptedLLM([answer("noted")])
    async with mcp_runtime(tmp_path, config, later) as (rt, work):
        (asked,) = await rt.tools.pending_questions(sid)
        assert asked.questions[1].header == "Flavour"
        await rt.tools.reply_question(sid, asked.id, [["Accept"], ["vanilla"], ["1"], [], []])
        await eventually(lambda: len(later.requests) == 1)
        await rt.sessions.wait_idle(sid)
    users = [m for m in later.requests[0].messages if isinstance(m, UserMessage)]
    assert "Answers to the questions asked before the interruption" in users[-1].content[0].text
    assert '"Flavour (required)"="vanilla"' in users[-1].content[0].text


async def test_sampling_runs_on_the_sessions_model_once_permitted(tmp_path: Path):
    client = ScriptedLLM([
        tool_calls(("c1", "test_summarize", {"text": "a long story about gulls"})),
        answer("Gulls, briefly, in five."),
        answer("summarized"),
    ])  # fmt: skip
    async with mcp_runtime(tmp_path, {"mcp": {"test": local()}}, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        with rt.hub.subscribe(sid) as sub:
            await rt.sessions.prompt(sid, prompt=prompt("summarize"))
            await published(sub, "permission.v2.asked")
        (pending,) = await rt.sessions.permissions(sid)
        await rt.sessions.reply_permission(sid, pending.id, "once")
        await rt.sessions.wait_idle(sid)
    assert (pending.permission, pending.resources, pending.tool) == (
        "mcp_sampling", ["test"], "test_summarize",
    )  # fmt: skip
    sampling = client.requests[1]
    assert sampling.system == ["Summarize in five words."] and sampling.tools == []
    assert sampling.generation.max_output_tokens == 50
    (user,) = sampling.messages
    assert isinstance(user, UserMessage) and user.content[0].text == "a long story about gulls"
    assert sampling.model == client.requests[0].model
    result = json.loads(last_result(client.requests[2])[0])
    assert result["content"] == {"type": "text", "text": "Gulls, briefly, in five."}
    assert result["stopReason"] == "endTurn"


async def test_sampling_denied_by_a_rule_fails_the_servers_request(tmp_path: Path):
    config = {"mcp": {"test": local()}, "permission": {"mcp_sampling": "deny"}}
    client = ScriptedLLM([tool_calls(("c1", "test_summarize", {"text": "x"})), answer("no")])
    async with mcp_runtime(tmp_path, config, client) as (rt, work):
        await connected(rt, work)
        sid = await new_session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("summarize"))
        await rt.sessions.wait_idle(sid)
    assert len(client.requests) == 2  # no sampling request reached the model
    text, failed = last_result(client.requests[1])
    assert failed and "Permission denied: agent build may not use mcp_sampling on test" in text
