"""Todos and questions over HTTP and the websocket, in OpenCode's shapes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import trio
from trio_websocket import open_websocket_url

from runtime.llm import LLMEvent, ScriptedLLM, StepFinish, StepStart, ToolCall, ToolMessage, Usage

from .conftest import answer, assert_valid, component, response_schema, served

S = "/api/session"
COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
}


def call(call_id: str, name: str, data: dict[str, Any]) -> list[LLMEvent]:
    return [
        StepStart(),
        ToolCall(call_id=call_id, name=name, input=data),
        StepFinish(finish_reason="tool-calls", usage=Usage()),
    ]


async def _session(client: httpx.AsyncClient, tmp_path: Any) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    r = await client.post(S, json={"location": {"directory": str(work)}})
    assert r.status_code == 200, r.text
    return str(r.json()["data"]["id"])


async def _prompt_until(g: Any, client: httpx.AsyncClient, sid: str, event: str) -> None:
    with g.rt.hub.subscribe(sid) as sub:
        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "go"}})
        assert r.status_code == 200, r.text
        with trio.fail_after(10):
            while getattr(await sub.receive(), "type", None) != event:
                pass


def _last_result(g: Any) -> tuple[str, bool]:
    results = [m for m in g.llm.requests[-1].messages if isinstance(m, ToolMessage)]
    part = results[-1].content[-1]
    return "".join(p.text for p in part.content), part.is_error


async def test_todo_routes_list_the_durable_list(tmp_path: Any) -> None:
    todos = [{"content": "write tests", "status": "pending", "priority": "high"}]
    llm = ScriptedLLM([call("c1", "todowrite", {"todos": todos}), answer("done")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client, tmp_path)
        assert (await client.get(f"/session/{sid}/todo")).json() == []
        await _prompt_until(g, client, sid, "todo.updated")
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        r = await client.get(f"/session/{sid}/todo")
        assert r.status_code == 200 and r.json() == todos
        assert_valid(r.json(), response_schema("/session/{sessionID}/todo", "get", 200))
        r = await client.get(f"{S}/{sid}/todo")
        assert r.json() == {"data": todos}
        r = await client.get(f"/session/ses_{'0' * 26}/todo")
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"
        doc = (await client.get("/doc")).json()
        assert "/session/{sessionID}/todo" in doc["paths"] and "/question" in doc["paths"]


async def test_question_answered_over_http_opencode_and_v2_routes(tmp_path: Any) -> None:
    llm = ScriptedLLM(
        [
            call("c1", "question", {"questions": [COLOR]}),
            call("c2", "question", {"questions": [COLOR]}),
            answer("done"),
        ]
    )
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client, tmp_path)
        await _prompt_until(g, client, sid, "question.v2.asked")
        r = await client.get("/question")
        [asked] = r.json()
        assert_valid(r.json(), response_schema("/question", "get", 200))
        assert asked["sessionID"] == sid and asked["tool"]["callID"] == "c1"
        assert_valid(asked, component("QuestionRequest"))
        r = await client.get(f"{S}/{sid}/question")
        assert r.json() == {"data": [asked]}
        assert_valid(r.json(), response_schema(f"{S}/{{sessionID}}/question", "get", 200))
        r = await client.post(
            f"/question/{asked['id']}/reply", json={"answers": [["Red"], ["Blue"]]}
        )
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
        r = await client.post("/question/que_nothere/reply", json={"answers": [["Red"]]})
        assert r.status_code == 404 and r.json()["_tag"] == "QuestionNotFoundError"
        r = await client.post(f"/question/{asked['id']}/reply", json={"answer": "Red"})
        assert r.status_code == 400
        assert len(g.llm.requests) == 1  # still waiting

        with g.rt.hub.subscribe(sid) as sub:
            r = await client.post(f"/question/{asked['id']}/reply", json={"answers": [["Red"]]})
            assert r.status_code == 200 and r.json() is True
            with trio.fail_after(10):
                while getattr(await sub.receive(), "type", None) != "question.v2.asked":
                    pass
        [second] = (await client.get(f"{S}/{sid}/question")).json()["data"]
        assert '"Which color?"="Red"' in _last_result(g)[0]
        r = await client.post(f"{S}/{sid}/question/{second['id']}/reject")
        assert r.status_code == 204, r.text
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        text, error = _last_result(g)
        assert error and "dismissed" in text
        assert (await client.get("/question")).json() == []


async def test_question_answered_over_the_websocket(tmp_path: Any) -> None:
    llm = ScriptedLLM([call("c1", "question", {"questions": [COLOR]}), answer("ok")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client, tmp_path)
        url = g.url.replace("http://", "ws://") + "/api/ws"
        async with open_websocket_url(url) as ws:
            await ws.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
            await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "go"}})
            with trio.fail_after(10):
                while True:
                    frame = json.loads(await ws.get_message())
                    if (
                        frame.get("type") == "event"
                        and frame["event"]["type"] == "question.v2.asked"
                    ):
                        break
            request_id = frame["event"]["data"]["id"]
            bad = {"type": "question.reply", "ref": 2, "sessionID": sid, "requestID": request_id,
                   "answers": "Blue"}  # fmt: skip
            await ws.send_message(json.dumps(bad))
            with trio.fail_after(10):
                while (reply := json.loads(await ws.get_message())).get("ref") != 2:
                    pass
            assert reply["error"]["_tag"] == "InvalidRequestError"
            good = {**bad, "ref": 3, "answers": [["Blue"]]}
            await ws.send_message(json.dumps(good))
            with trio.fail_after(10):
                while (reply := json.loads(await ws.get_message())).get("ref") != 3:
                    pass
            assert "error" not in reply
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        text, error = _last_result(g)
        assert not error and '"Which color?"="Blue"' in text


def _by_prompt(parent: list[list[LLMEvent]], child: dict[str, list[LLMEvent]]) -> ScriptedLLM:
    turns = iter(parent)

    def script(request: Any) -> list[LLMEvent]:
        users = [
            p.text
            for m in request.messages
            if type(m).__name__ == "UserMessage"
            for p in m.content
            if hasattr(p, "text")
        ]
        if users[-1] in child and not isinstance(request.messages[-1], ToolMessage):
            return child[users[-1]]
        return next(turns)

    return ScriptedLLM(script)


async def test_task_over_http_answers_the_parent_and_an_interrupt_stops_the_child(
    tmp_path: Any,
) -> None:
    task = {"description": "look", "prompt": "look around", "subagent_type": "general"}
    slow = {"description": "wait", "prompt": "sleep", "subagent_type": "general"}
    llm = _by_prompt(
        [call("c1", "task", task), answer("thanks"), call("c2", "task", slow)],
        {"look around": answer("all fine"), "sleep": call("s1", "shell", {"command": "sleep 30"})},
    )
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client, tmp_path)
        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "delegate"}})
        assert r.status_code == 200
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        text, error = _last_result(g)
        assert not error and "<task_result>\nall fine\n</task_result>" in text
        child = text.split()[1]
        info = (await client.get(f"{S}/{child}")).json()["data"]
        assert info["parentID"] == sid and info["agent"] == "general"

        with g.rt.hub.subscribe(None) as sub:
            await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "again"}})
            with trio.fail_after(10):
                while True:
                    item = await sub.receive()
                    if getattr(item, "type", None) == "session.next.tool.called" and (
                        item.aggregate_id != sid
                    ):
                        break
        sleeper = item.aggregate_id
        assert (await client.post(f"{S}/{sid}/interrupt")).status_code in (200, 204)
        with trio.fail_after(10):
            assert (await client.post(f"{S}/{sleeper}/wait")).status_code == 204
        assert g.rt.tools.tasks_running == 0
        assert sleeper not in g.rt.sessions.active()


async def test_skills_are_listed_and_a_new_one_is_found(tmp_path: Any) -> None:
    def plant(folder: str, name: str) -> None:
        path = tmp_path / folder / name
        path.mkdir(parents=True)
        (path / "SKILL.md").write_text(f"---\ndescription: about {name}\n---\nbody of {name}\n")

    plant(".kittiwake/skill", "alpha")
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        r = await client.get("/api/skill")
        assert r.status_code == 200, r.text
        assert_valid(r.json(), response_schema("/api/skill", "get", 200))
        assert r.json()["location"]["directory"] == str(tmp_path.resolve())
        [alpha] = r.json()["data"]
        assert alpha["name"] == "alpha" and alpha["description"] == "about alpha"
        assert alpha["content"] == "body of alpha"
        plant(".opencode/skills", "beta")
        r = await client.get("/skill")
        assert_valid(r.json(), response_schema("/skill", "get", 200))
        assert [s["name"] for s in r.json()] == ["alpha", "beta"]
        r = await client.get("/api/skill", params={"location[directory]": "/etc"})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"


async def test_commands_are_listed_and_run_over_both_routes(tmp_path: Any) -> None:
    folder = tmp_path / ".kittiwake" / "command"
    folder.mkdir(parents=True)
    (folder / "explain.md").write_text(
        "---\ndescription: Explain a file\nmodel: p1/m1\n---\nExplain $ARGUMENTS using @notes.txt\n"
    )
    (tmp_path / "notes.txt").write_text("the notes\n")
    llm = ScriptedLLM([answer("explained"), answer("again")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        r = await client.get("/command")
        assert_valid(r.json(), response_schema("/command", "get", 200))
        listed = {c["name"]: c for c in r.json()}
        assert listed["explain"]["hints"] == ["$ARGUMENTS"] and "init" in listed
        assert listed["explain"]["model"] == "p1/m1"
        r = await client.get("/api/command")
        assert_valid(r.json(), response_schema("/api/command", "get", 200))
        [explain] = [c for c in r.json()["data"] if c["name"] == "explain"]
        assert explain["model"] == {"id": "m1", "providerID": "p1"}

        r = await client.post(S, json={"location": {"directory": str(tmp_path)}})
        sid = r.json()["data"]["id"]
        body = {"command": "explain", "arguments": "the tests", "model": "p1/m1"}
        r = await client.post(f"/session/{sid}/command", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["info"]["role"] == "assistant"
        assert [p["text"] for p in r.json()["parts"] if p["type"] == "text"][-1] == "explained"
        sent = g.llm.requests[0]
        text = sent.messages[-1].content[0].text
        assert text.startswith("Explain the tests using @notes.txt")
        assert '<file path="notes.txt">\nthe notes\n' in text
        assert sent.model.model_id == "m1"

        r = await client.post(f"{S}/{sid}/command", json={"command": "init"})
        assert r.status_code == 200, r.text
        assert r.json()["data"]["prompt"]["text"].startswith("Look through this project")
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        r = await client.post(f"{S}/{sid}/command", json={"command": "nope"})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
        r = await client.post(f"/session/{sid}/command", json={"arguments": "x"})
        assert r.status_code == 400


async def test_plan_exit_and_a_denied_skill_over_http(tmp_path: Any) -> None:
    from runtime.agents import BUILTIN_AGENTS, PLAN, PermissionRule

    for name in ("notes", "secret"):
        path = tmp_path / ".kittiwake" / "skill" / name
        path.mkdir(parents=True)
        (path / "SKILL.md").write_text(f"---\ndescription: about {name}\n---\nUse {name}.\n")
    deny = PermissionRule(permission="skill", pattern="secret", action="deny")
    plan = msgspec.structs.replace(PLAN, permission=[*PLAN.permission, deny])
    llm = ScriptedLLM(
        [
            call("c1", "skill", {"name": "secret"}),
            call("c2", "skill", {"name": "notes"}),
            call("c3", "plan_exit", {}),
            answer("building now"),
        ]
    )
    agents = {**BUILTIN_AGENTS, "plan": plan}
    async with (
        served(tmp_path, llm=llm, agents=agents) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        r = await client.post(S, json={"location": {"directory": str(tmp_path)}, "agent": "plan"})
        sid = r.json()["data"]["id"]
        await _prompt_until(g, client, sid, "question.v2.asked")
        [skill] = [t for t in g.llm.requests[0].tools if t.name == "skill"]
        assert "<name>notes</name>" in skill.description and "secret" not in skill.description
        results = [m for m in g.llm.requests[2].messages if isinstance(m, ToolMessage)]
        denied, loaded = results[0].content[0], results[1].content[0]
        assert denied.is_error and "Permission denied" in denied.content[0].text
        assert not loaded.is_error and "Use notes." in loaded.content[0].text
        [asked] = (await client.get(f"{S}/{sid}/question")).json()["data"]
        assert [o["label"] for o in asked["questions"][0]["options"]] == ["Yes", "No"]
        r = await client.post(
            f"{S}/{sid}/question/{asked['id']}/reply", json={"answers": [["Yes"]]}
        )
        assert r.status_code == 204
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        assert (await client.get(f"{S}/{sid}")).json()["data"]["agent"] == "build"
        assert g.llm.requests[-1].system[0] != g.llm.requests[0].system[0]  # build's prompt


async def test_a_subagent_childs_permission_request_surfaces_on_the_parent(tmp_path: Any) -> None:
    from runtime.agents import BUILTIN_AGENTS, AgentInfo, PermissionRule, compose_rules

    ask = PermissionRule(permission="read", action="ask")
    reader = AgentInfo(name="reader", mode="subagent", permission=compose_rules((), [ask]))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("kittiwake notes\n")
    task = {"description": "read", "prompt": "read the notes", "subagent_type": "reader"}
    llm = _by_prompt(
        [call("c1", "task", task), answer("the notes say kittiwake"), answer("thanks")],
        {"read the notes": call("r1", "read", {"filePath": "notes.txt"})},  # then the child answers
    )
    agents = {**BUILTIN_AGENTS, "reader": reader}
    async with (
        served(tmp_path, llm=llm, agents=agents) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = await _session(client, tmp_path)
        with g.rt.hub.subscribe(None) as sub:
            await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "delegate"}})
            with trio.fail_after(10):
                while getattr(await sub.receive(), "type", None) != "permission.v2.asked":
                    pass
        [request] = (await client.get(f"{S}/{sid}/permission")).json()["data"]
        assert request["sessionID"] != sid and request["action"] == "read"
        [child] = await g.rt.sessions.children(sid)
        assert request["sessionID"] == child.id
        r = await client.get(f"{S}/{sid}/permission/{request['id']}")
        assert r.status_code == 200 and r.json()["data"]["id"] == request["id"]
        r = await client.post(f"{S}/{sid}/permission/{request['id']}/reply", json={"reply": "once"})
        assert r.status_code == 204, r.text
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        child_results = [m for m in g.llm.requests[2].messages if isinstance(m, ToolMessage)]
        assert "kittiwake notes" in child_results[-1].content[0].content[0].text
        assert "<task_result>\nthe notes say kittiwake" in _last_result(g)[0]
        assert (await client.get(f"{S}/{sid}/permission")).json()["data"] == []
