"""Permission requests over HTTP and the websocket: list, get, reply, and the tool runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from trio_websocket import open_websocket_url

from runtime.agents import BUILTIN_AGENTS, AgentInfo, PermissionRule
from runtime.agents._agent import compose_rules
from runtime.llm import LLMEvent, ScriptedLLM, StepFinish, StepStart, ToolCall, ToolMessage, Usage
from storage import Permission

from .conftest import answer, assert_valid, component, response_schema, served

S = "/api/session"
PERM = "/api/session/{sessionID}/permission"
CAREFUL = AgentInfo(
    name="careful", permission=compose_rules((), (PermissionRule(permission="bash", action="ask"),))
)
AGENTS = {**BUILTIN_AGENTS, "careful": CAREFUL}


def shell(call_id: str, command: str) -> list[LLMEvent]:
    return [
        StepStart(),
        ToolCall(call_id=call_id, name="shell", input={"command": command}),
        StepFinish(finish_reason="tool-calls", usage=Usage()),
    ]


async def pending(client: httpx.AsyncClient, sid: str) -> list[dict]:
    r = await client.get(f"{S}/{sid}/permission")
    assert r.status_code == 200, r.text
    assert_valid(r.json(), response_schema(PERM, "get", 200))
    return list(r.json()["data"])


async def prompt_until_asked(g: Any, client: httpx.AsyncClient, sid: str) -> list[dict]:
    """Prompt *sid*, wait until its tool call has asked for permission (the stored
    ``permission.v2.asked`` event is published), then list the pending requests."""
    with g.rt.hub.subscribe(sid) as sub:
        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "run it"}})
        assert r.status_code == 200, r.text
        with trio.fail_after(10):
            while getattr(await sub.receive(), "type", None) != "permission.v2.asked":
                pass
    return await pending(client, sid)


async def _careful_session(client: httpx.AsyncClient, tmp_path) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    body = {"agent": "careful", "location": {"directory": str(work)}}
    r = await client.post(S, json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["data"]["id"])


@asynccontextmanager
async def asking(tmp_path, command: str) -> AsyncIterator[tuple[Any, httpx.AsyncClient, str, dict]]:
    """A served careful session whose prompt's shell call waits for permission: yields the
    server, a client, the session id and the pending request."""
    llm = ScriptedLLM([shell("c1", command), answer("done")])
    async with (
        served(tmp_path, llm=llm, agents=AGENTS) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = await _careful_session(client, tmp_path)
        [request] = await prompt_until_asked(g, client, sid)
        yield g, client, sid, request


async def test_http_lists_a_pending_request_and_the_reply_lets_the_tool_run(tmp_path):
    async with asking(tmp_path, "echo approved > proof.txt") as (g, client, sid, request):
        llm = g.llm
        assert request["sessionID"] == sid and request["action"] == "bash"
        assert request["metadata"]["tool"] == "shell" and request["metadata"]["status"] == "pending"
        assert_valid(request, component("PermissionV2Request"))

        r = await client.get(f"{S}/{sid}/permission/{request['id']}")
        assert r.status_code == 200
        assert_valid(r.json(), response_schema(PERM + "/{requestID}", "get", 200))
        assert r.json()["data"] == request

        reply = PERM + "/{requestID}/reply"
        r = await client.post(f"{S}/{sid}/permission/{request['id']}/reply", json={"reply": "yes"})
        assert r.status_code == 400
        assert_valid(r.json(), response_schema(reply, "post", 400))
        r = await client.post(f"{S}/{sid}/permission/per_nothere/reply", json={"reply": "once"})
        assert r.status_code == 404 and r.json()["_tag"] == "PermissionNotFoundError"
        assert_valid(r.json(), response_schema(reply, "post", 404))
        assert not (tmp_path / "work" / "proof.txt").exists()

        r = await client.post(
            f"{S}/{sid}/permission/{request['id']}/reply",
            json={"reply": "once", "message": "go ahead"},
        )
        assert r.status_code == 204, r.text
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204
        assert (tmp_path / "work" / "proof.txt").read_text().strip() == "approved"
        assert len(llm.requests) == 2
        assert (await client.get(f"{S}/{sid}/permission")).json()["data"] == []
        r = await client.get(f"{S}/{sid}/permission/{request['id']}")
        assert r.json()["data"]["metadata"]["status"] == "once"

        r = await client.post(f"{S}/{sid}/permission/{request['id']}/reply", json={"reply": "once"})
        assert r.status_code == 409 and r.json()["_tag"] == "ConflictError"
        r = await client.post(f"{S}/{sid}/permission", json={"action": "bash", "resources": []})
        assert r.status_code == 200 and r.json()["data"]["effect"] == "allow"  # nothing to ask
        missing = "ses_" + "0" * 26
        r = await client.get(f"{S}/{missing}/permission")
        assert r.status_code == 404
        assert_valid(r.json(), response_schema(PERM, "get", 404))


async def test_websocket_permission_reply_rejects_and_the_tool_fails(tmp_path):
    llm = ScriptedLLM([shell("c1", "echo nope > proof.txt"), answer("ok")])
    async with (
        served(tmp_path, llm=llm, agents=AGENTS) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = await _careful_session(client, tmp_path)
        [request] = await prompt_until_asked(g, client, sid)
        url = g.url.replace("http://", "ws://") + "/api/ws"
        async with open_websocket_url(url) as ws:
            frame = {"type": "permission.reply", "ref": 1, "sessionID": sid,
                     "requestID": request["id"], "reply": "maybe"}  # fmt: skip
            await ws.send_message(json.dumps(frame))
            with trio.fail_after(10):
                bad = json.loads(await ws.get_message())
            assert bad["ref"] == 1 and bad["error"]["_tag"] == "InvalidRequestError"
            frame = {**frame, "ref": 2, "reply": "reject"}
            await ws.send_message(json.dumps(frame))
            with trio.fail_after(10):
                ok = json.loads(await ws.get_message())
            assert ok == {"type": "reply", "ref": 2, "data": None}
        await client.post(f"{S}/{sid}/wait")
        assert not (tmp_path / "work" / "proof.txt").exists()
        result = [m for m in llm.requests[1].messages if isinstance(m, ToolMessage)][-1]
        assert result.content[0].is_error


async def test_clients_create_permission_requests_under_the_agents_rules(tmp_path):
    async with (
        served(tmp_path, agents=AGENTS) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = await _careful_session(client, tmp_path)
        create = response_schema(PERM, "post", 200)

        async def ask(**body) -> tuple[int, dict]:
            r = await client.post(f"{S}/{sid}/permission", json=body)
            if r.status_code == 200:
                assert_valid(r.json(), create)
            return r.status_code, r.json()

        status, body = await ask(action="bash", resources=["ls"], id="per_client1",
                                 source={"type": "tool", "messageID": "msg_1", "callID": "c9"},
                                 metadata={"why": "listing"}, save=["ls -la"])  # fmt: skip
        assert status == 200 and body["data"] == {"id": "per_client1", "effect": "ask"}
        listed = await pending(client, sid)
        assert [p["id"] for p in listed] == ["per_client1"]
        request = listed[0]
        assert request["action"] == "bash" and request["resources"] == ["ls"]
        assert request["save"] == ["ls -la"] and request["metadata"]["why"] == "listing"
        assert request["source"] == {"type": "tool", "messageID": "msg_1", "callID": "c9"}

        # An exact retry answers the same; the id for something else is a conflict.
        assert (await ask(action="bash", resources=["ls"], id="per_client1"))[1]["data"] == {
            "id": "per_client1",
            "effect": "ask",
        }
        status, body = await ask(action="bash", resources=["rm"], id="per_client1")
        assert status == 409 and body["_tag"] == "ConflictError"

        # Allowed and denied actions record nothing.
        status, body = await ask(action="read", resources=["notes.txt"])
        assert body["data"]["effect"] == "allow" and body["data"]["id"].startswith("per")
        status, body = await ask(action="edit", resources=["a.py"], agent="plan")
        assert body["data"]["effect"] == "deny"
        assert [p["id"] for p in await pending(client, sid)] == ["per_client1"]

        # "always" saves what the request named in save, for the project.
        r = await client.post(f"{S}/{sid}/permission/per_client1/reply", json={"reply": "always"})
        assert r.status_code == 204
        assert (await ask(action="bash", resources=["ls -la"]))[1]["data"]["effect"] == "allow"
        assert (await ask(action="bash", resources=["ls"]))[1]["data"]["effect"] == "ask"

        status, body = await ask(action="bash")
        assert status == 400 and body["_tag"] == "InvalidRequestError"
        status, body = await ask(action="", resources=["x"])
        assert status == 400 and body["_tag"] == "InvalidRequestError"
        r = await client.post(f"{S}/ses_nothere/permission", json={"action": "bash",
                                                                   "resources": ["x"]})  # fmt: skip
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"


async def test_deleting_a_session_with_a_pending_request(tmp_path):
    async with asking(tmp_path, "echo never > proof.txt") as (g, client, sid, request):
        pid = (await client.get("/project/current")).json()["id"]
        with trio.fail_after(10):
            r = await client.delete(f"/project/{pid}/session/{sid}")
        assert r.status_code == 200 and r.json() is True
        r = await client.get(f"{S}/{sid}/permission/{request['id']}")
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"
        assert not (tmp_path / "work" / "proof.txt").exists()  # the call never ran
        stored = await g.rt.storage.read(Permission(request_id=request["id"]))
        assert stored is None


async def test_active_lists_sessions_whose_drain_runs(tmp_path):
    async with asking(tmp_path, "echo ok > proof.txt") as (_, client, sid, request):
        idle = (await client.post(S, json={})).json()["data"]["id"]
        r = await client.get(f"{S}/active")  # the careful session's drain waits on the reply
        assert_valid(r.json(), response_schema(f"{S}/active", "get", 200))
        assert r.json() == {"data": {sid: {"type": "running"}}}
        assert idle not in r.json()["data"]
        await client.post(f"{S}/{sid}/permission/{request['id']}/reply", json={"reply": "once"})
        await client.post(f"{S}/{sid}/wait")
        assert (await client.get(f"{S}/active")).json() == {"data": {}}
