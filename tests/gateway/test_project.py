"""OpenCode's project, file, provider, config, agent and log routes over real HTTP."""

from __future__ import annotations

import logging

import httpx
import pytest
import trio

from runtime.agents._loader import AGENT_DIR
from runtime.llm import ScriptedLLM, StepFinish, StepStart, ToolCall, Usage

from .conftest import OPENAPI, answer, assert_valid, component, response_schema, served

SESSION_MESSAGES = "/session/{sessionID}/message"


def array_of(name: str) -> dict:
    return {"type": "array", "items": {"$ref": f"#/components/schemas/{name}"},
            "components": OPENAPI["components"]}  # fmt: skip


async def project_id(client: httpx.AsyncClient) -> str:
    r = await client.get("/project/current")
    assert r.status_code == 200
    assert_valid(r.json(), response_schema("/project/current", "get", 200))
    return str(r.json()["id"])


async def test_project_sessions_and_messages_as_info_and_parts(tmp_path):
    (tmp_path / "notes.txt").write_text("remember the kittiwake\n")
    read = [StepStart(), ToolCall(call_id="c1", name="read", input={"filePath": "notes.txt"}),
            StepFinish(finish_reason="tool-calls", usage=Usage(input_tokens=4, output_tokens=1))]  # fmt: skip
    llm = ScriptedLLM([read, answer("it says kittiwake"), answer("second answer")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        pid = await project_id(client)
        r = await client.get("/project")
        assert_valid(r.json(), response_schema("/project", "get", 200))
        assert [p["id"] for p in r.json()] == [pid]
        assert r.json()[0]["worktree"] == str(tmp_path.resolve())

        r = await client.post(f"/project/{pid}/session", json={"title": "t"})
        assert r.status_code == 200, r.text
        assert_valid(r.json(), component("Session"))
        sid = r.json()["id"]
        assert r.json()["projectID"] == pid and r.json()["directory"] == str(tmp_path.resolve())
        r = await client.get(f"/project/{pid}/session")
        assert_valid(r.json(), array_of("Session"))
        assert [s["id"] for s in r.json()] == [sid]
        r = await client.get(f"/project/{pid}/session/{sid}")
        assert r.json()["id"] == sid
        r = await client.get(f"/project/prj_other/session/{sid}")
        assert r.status_code == 404 and r.json()["_tag"] == "NotFoundError"
        r = await client.post(f"/project/{pid}/session", json={"directory": "/etc"})
        assert r.status_code == 400

        r = await client.post(
            f"/project/{pid}/session/{sid}/message",
            json={"parts": [{"type": "text", "text": "what do the notes say?"}]},
        )
        assert r.status_code == 200, r.text
        assert_valid(r.json(), response_schema(SESSION_MESSAGES, "post", 200))
        reply = r.json()
        assert reply["info"]["role"] == "assistant"
        assert [p["type"] for p in reply["parts"]] == ["step-start", "text", "step-finish"]
        assert reply["parts"][1]["text"] == "it says kittiwake"

        r = await client.get(f"/project/{pid}/session/{sid}/message")
        assert r.status_code == 200
        assert_valid(r.json(), response_schema(SESSION_MESSAGES, "get", 200))
        items = r.json()
        assert [i["info"]["role"] for i in items] == ["user", "assistant", "assistant"]
        assert items[0]["parts"][0]["text"] == "what do the notes say?"
        assert [p["type"] for p in items[1]["parts"]] == ["step-start", "tool", "step-finish"]
        tool = items[1]["parts"][1]
        assert tool["type"] == "tool" and tool["tool"] == "read" and tool["callID"] == "c1"
        assert tool["state"]["status"] == "completed"
        assert "remember the kittiwake" in tool["state"]["output"]
        assert items[1]["info"]["parentID"] == items[0]["info"]["id"]
        assert items[1]["info"]["tokens"]["input"] == 4

        mid = items[0]["info"]["id"]
        r = await client.get(f"/project/{pid}/session/{sid}/message/{mid}")
        assert r.status_code == 200 and r.json() == items[0]
        r = await client.get(f"/project/{pid}/session/{sid}/message/msg_nothere")
        assert r.status_code == 404 and r.json()["_tag"] == "MessageNotFoundError"

        r = await client.post(f"/project/{pid}/session/{sid}/abort")
        assert r.status_code == 200 and r.json() is True
        for method, path, status in (("POST", "/share", 501), ("DELETE", "/share", 501)):
            r = await client.request(method, f"/project/{pid}/session/{sid}{path}")
            assert r.status_code == status, (method, path)
            assert r.json()["_tag"] in ("NotImplementedError", "ServiceUnavailableError")
            assert r.json()["message"]
        r = await client.post(f"/project/{pid}/session/{sid}/revert", json={})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
        r = await client.post(f"/project/{pid}/session/{sid}/unrevert")
        assert r.status_code == 200 and r.json()["id"] == sid and "revert" not in r.json()
        r = await client.get(f"/project/{pid}/session/{sid}")
        assert r.status_code == 200  # none of those changed it


async def test_child_sessions_over_project_routes(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        pid = await project_id(client)
        base = f"/project/{pid}/session"
        parent = (await client.post(base, json={})).json()["id"]
        r = await client.post(base, json={"parentID": parent, "title": "sub"})
        assert r.status_code == 200
        assert_valid(r.json(), component("Session"))
        child = r.json()
        assert child["parentID"] == parent
        r = await client.get(f"{base}/{parent}/children")
        assert r.status_code == 200 and [s["id"] for s in r.json()] == [child["id"]]
        assert_valid(r.json(), array_of("Session"))
        v2 = (await client.get(f"/api/session/{child['id']}")).json()["data"]
        assert v2["parentID"] == parent
        r = await client.post(base, json={"parentID": "ses_missing"})
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"
        assert (await client.post(f"/api/session/{child['id']}/wait")).status_code == 204
        assert (await client.delete(f"{base}/{parent}")).json() is True
        r = await client.get(f"{base}/{child['id']}")
        assert r.status_code == 404  # deleted with its parent
        r = await client.post(f"/api/session/{child['id']}/wait")  # and no longer known
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"


async def test_init_has_the_session_write_agents_md(tmp_path):
    write = [StepStart(), ToolCall(call_id="w1", name="write",
                                   input={"filePath": "AGENTS.md", "content": "# Agents\nmake test\n"}),
             StepFinish(finish_reason="tool-calls", usage=Usage(input_tokens=4, output_tokens=1))]  # fmt: skip
    llm = ScriptedLLM([write, answer("wrote AGENTS.md")])
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        pid = await project_id(client)
        sid = (await client.post(f"/project/{pid}/session", json={})).json()["id"]
        body = {"modelID": "gpt-x", "providerID": "acme", "messageID": "msg_init1"}
        r = await client.post(f"/project/{pid}/session/{sid}/init", json=body, timeout=30)
        assert r.status_code == 200 and r.json() is True
        assert_valid(r.json(), response_schema("/session/{sessionID}/init", "post", 200))
        assert (tmp_path / "AGENTS.md").read_text() == "# Agents\nmake test\n"
        first = llm.requests[0]
        assert "AGENTS.md" in first.messages[-1].content[0].text  # the init prompt
        assert (first.model.provider_id, first.model.model_id) == ("acme", "gpt-x")
        # An exact retry is answered from the settled session, without a new turn.
        r = await client.post(f"/project/{pid}/session/{sid}/init", json=body, timeout=30)
        assert r.status_code == 200 and len(llm.requests) == 2
        r = await client.post(f"/project/{pid}/session/{sid}/init", json={"modelID": "x"})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"


async def test_file_routes_stay_inside_the_project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kittiwake_main.py").write_text("print('hi')\n")
    (tmp_path / "src" / "other.txt").write_text("x\n")
    (tmp_path / "README.md").write_text("# readme\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        r = await client.get("/find/file", params={"query": "kwmain"})
        assert r.status_code == 200
        assert_valid(r.json(), response_schema("/find/file", "get", 200))
        assert r.json()[0] == "src/kittiwake_main.py"
        r = await client.get("/find/file", params={"query": "src", "type": "directory"})
        assert r.json() == ["src/"]
        assert (await client.get("/find/file")).status_code == 400
        assert (
            await client.get("/find/file", params={"query": "a", "limit": 0})
        ).status_code == 400

        r = await client.get("/file", params={"path": "src"})
        assert_valid(r.json(), response_schema("/file", "get", 200))
        assert [n["name"] for n in r.json()] == ["kittiwake_main.py", "other.txt"]
        assert r.json()[0]["path"] == "src/kittiwake_main.py"
        r = await client.get("/file", params={"path": "."})
        assert {"src", "README.md"} <= {n["name"] for n in r.json()}

        r = await client.get("/file/content", params={"path": "src/kittiwake_main.py"})
        assert_valid(r.json(), response_schema("/file/content", "get", 200))
        assert r.json() == {"type": "text", "content": "print('hi')\n"}
        r = await client.get("/file/content", params={"path": "blob.bin"})
        assert r.json()["type"] == "binary" and r.json()["content"] == "AAEC"

        for route in ("/file", "/file/content"):
            for escape in ("../", "../../etc/passwd", "/etc/passwd", "src/../../x"):
                r = await client.get(route, params={"path": escape})
                assert r.status_code == 400, (route, escape)
                assert r.json()["_tag"] == "InvalidRequestError"
        r = await client.get("/find/file", params={"query": "a", "directory": "/"})
        assert r.status_code == 400

        pid = await project_id(client)
        r = await client.get(f"/project/{pid}/find/file", params={"query": "kwmain"})
        assert r.json()[0] == "src/kittiwake_main.py"
        r = await client.post(f"/project/{pid}/session", json={"directory": "src"})
        sid = r.json()["id"]
        scoped = f"/project/{pid}/session/{sid}"
        r = await client.get(scoped + "/find/file", params={"query": "other"})
        assert r.json() == ["other.txt"]
        r = await client.get(scoped + "/file", params={"path": "."})
        assert [n["name"] for n in r.json()] == ["kittiwake_main.py", "other.txt"]
        r = await client.get(scoped + "/file/content", params={"path": "other.txt"})
        assert r.json()["content"] == "x\n"
        r = await client.get(scoped + "/file/content", params={"path": "../README.md"})
        assert r.status_code == 400
        (tmp_path / "src" / "link").symlink_to(tmp_path.parent)
        r = await client.get(scoped + "/file", params={"path": "link"})
        assert r.status_code == 400
        # A session of another project (the directory "/") is not one of this project's.
        outside = (await client.post("/api/session", json={"location": {"directory": "/"}})).json()
        assert outside["data"]["projectID"] != pid
        r = await client.get(f"/project/{pid}/session/{outside['data']['id']}/file/status")
        assert r.status_code == 404

        r = await client.get("/file/status")
        assert r.json() == []  # not a git work tree
        git = ["git", "-c", "user.email=k@example.com", "-c", "user.name=k"]
        await trio.run_process([*git, "init", "-q"], cwd=tmp_path)
        (tmp_path / ".gitignore").write_text("data/\n")
        await trio.run_process([*git, "add", "README.md", ".gitignore"], cwd=tmp_path)
        await trio.run_process([*git, "commit", "-qm", "init"], cwd=tmp_path)
        (tmp_path / "README.md").write_text("# readme\nmore\n")
        r = await client.get("/file/status")
        assert_valid(r.json(), response_schema("/file/status", "get", 200))
        status = {f["path"]: f for f in r.json()}
        assert status["README.md"] == {"path": "README.md", "added": 1, "removed": 0,
                                       "status": "modified"}  # fmt: skip
        assert status["src/"]["status"] == "added"


async def test_providers_config_agents_and_log(tmp_path, caplog):
    agents = tmp_path / AGENT_DIR
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\ndescription: reviews code\n---\nReview carefully.\n")
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        r = await client.get("/provider")
        assert r.status_code == 200
        body = r.json()
        assert body["all"] and set(body["default"]) <= {p["id"] for p in body["all"]}
        sample = {**body, "all": body["all"][:3]}
        assert_valid(sample, response_schema("/provider", "get", 200))
        r = await client.get("/config/providers")
        assert [p["id"] for p in r.json()["providers"]] == [p["id"] for p in body["all"]]
        assert_valid({**r.json(), "providers": r.json()["providers"][:3]},
                     response_schema("/config/providers", "get", 200))  # fmt: skip

        r = await client.get("/config")
        assert_valid(r.json(), response_schema("/config", "get", 200))

        pid = await project_id(client)
        r = await client.get(f"/project/{pid}/agent")
        assert r.status_code == 200
        assert_valid(r.json(), response_schema("/agent", "get", 200))
        names = {a["name"]: a for a in r.json()}
        assert {"build", "plan", "reviewer"} <= set(names)
        assert names["reviewer"]["description"] == "reviews code"
        assert names["build"]["native"] is True and names["reviewer"]["native"] is False
        assert {"permission": "bash", "pattern": "*", "action": "deny"} in names["plan"][
            "permission"
        ]
        r = await client.get(f"/project/{pid}/agent", params={"directory": "/"})
        assert r.status_code == 400
        assert (await client.get("/project/nope/agent")).status_code == 404

        with caplog.at_level(logging.INFO, logger="kittiwake.client"):
            r = await client.post(
                "/log", json={"service": "tui", "level": "warn", "message": "hello", "extra": {}}
            )
        assert r.status_code == 204
        [record] = [rec for rec in caplog.records if rec.name == "kittiwake.client"]
        assert record.levelno == logging.WARNING and record.getMessage() == "hello"
        assert record.service == "tui"
        r = await client.post("/log", json={"service": "tui", "level": "loud", "message": "x"})
        assert r.status_code == 400


@pytest.mark.parametrize("query", ["", "zzzz"])
def test_fuzzy_score_orders_and_rejects(query):
    from gateway.opencode._files import fuzzy_score

    if query:
        assert fuzzy_score(query, "src/main.py") is None
    else:
        assert fuzzy_score(query, "a") is not None
    a = fuzzy_score("main", "src/main.py")
    b = fuzzy_score("main", "m/a/i/n/other.py")
    assert a is not None and b is not None and a > b
