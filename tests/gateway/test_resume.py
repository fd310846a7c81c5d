"""A session a SIGKILL cut mid-tool, served over HTTP: listed as needing a resume, resumed
by the route, the websocket frame and ``kittiwake sessions resume``; its failures visible."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import httpx
import trio
from trio_websocket import open_websocket_url

from runtime import llm
from tests.execution.conftest import cut_tool_and_step, run_child_until_cut
from tests.provider_rules import assert_accepted

from .conftest import answer, served
from .test_cli import kittiwake
from .test_streams import recv, ws_url

SID = "ses_kill"


async def _crash_cut(tmp_path: Path) -> None:
    """Leave session ``ses_kill`` in ``tmp_path/data`` with a turn a SIGKILL cut mid-tool."""
    (tmp_path / "work").mkdir()
    await trio.to_thread.run_sync(
        partial(run_child_until_cut, tmp_path / "data", tmp_path / "work", queue=False)
    )


async def _resumed(g: object, client: httpx.AsyncClient) -> None:
    """The resumed session's request was accepted, and nothing says it needs a resume now."""
    rt, provider = g.rt, g.llm  # type: ignore[attr-defined]
    assert (await client.post(f"/api/session/{SID}/wait")).status_code == 204
    context = await rt.sessions.context(SID)
    assert len(provider.requests) == 1
    assert_accepted(provider.requests[0], context)
    cut_tool_and_step(context)
    info = (await client.get(f"/api/session/{SID}")).json()["data"]
    assert "needsResume" not in info and "lastError" not in info
    listed = (await client.get("/api/session")).json()["data"]
    assert [s.get("needsResume") for s in listed if s["id"] == SID] == [None]


async def test_a_crash_cut_session_is_listed_and_resumed_over_http(tmp_path: Path) -> None:
    await _crash_cut(tmp_path)
    provider = llm.ScriptedLLM([answer("resumed")])
    async with served(tmp_path, llm=provider) as g, httpx.AsyncClient(base_url=g.url) as client:
        listed = (await client.get("/api/session")).json()["data"]
        assert [s["needsResume"] for s in listed if s["id"] == SID] == [True]
        assert (await client.get(f"/api/session/{SID}")).json()["data"]["needsResume"] is True
        assert provider.requests == []  # nothing retried by itself

        missing = await client.post("/api/session/ses_missing/resume")
        assert missing.status_code == 404
        assert missing.json()["_tag"] == "SessionNotFoundError"

        assert (await client.post(f"/api/session/{SID}/resume")).status_code == 204
        await _resumed(g, client)

        again = await client.post(f"/api/session/{SID}/resume")
        assert again.status_code == 409
        assert again.json() == {
            "_tag": "ResumeNotNeededError",
            "message": f"Session {SID} does not need a resume",
            "sessionID": SID,
        }
        assert len(provider.requests) == 1


async def test_the_websocket_resume_frame(tmp_path: Path) -> None:
    await _crash_cut(tmp_path)
    provider = llm.ScriptedLLM([answer("resumed")])
    async with served(tmp_path, llm=provider) as g, httpx.AsyncClient(base_url=g.url) as client:
        async with open_websocket_url(ws_url(g.url)) as ws:
            await ws.send_message(json.dumps({"type": "resume", "ref": 1, "sessionID": SID}))
            assert await recv(ws) == {"type": "reply", "ref": 1, "data": None}
            await _resumed(g, client)
            await ws.send_message(json.dumps({"type": "resume", "ref": 2, "sessionID": SID}))
            refused = await recv(ws)
            assert refused["ref"] == 2 and refused["error"]["_tag"] == "ResumeNotNeededError"
            unknown = {"type": "resume", "ref": 3, "sessionID": "ses_missing"}
            await ws.send_message(json.dumps(unknown))
            assert (await recv(ws))["error"]["_tag"] == "SessionNotFoundError"


async def test_kittiwake_sessions_resume(tmp_path: Path) -> None:
    await _crash_cut(tmp_path)
    provider = llm.ScriptedLLM([answer("resumed")])
    async with served(tmp_path, llm=provider) as g, httpx.AsyncClient(base_url=g.url) as client:
        listed = await kittiwake("sessions", "list", "--attach", g.url)
        assert f"{SID}  " in listed.stdout.decode() and "[needs resume]" in listed.stdout.decode()
        done = await kittiwake("sessions", "resume", SID, "--attach", g.url)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == f"resumed {SID}\n"
        # Its progress on stderr: what it does, then the run's answer as it streams.
        assert done.stderr.decode() == (
            f"kittiwake: resuming {SID}; following its run until it is idle\nresumed\n"
        )
        await _resumed(g, client)
        again = await kittiwake("sessions", "resume", SID, "--attach", g.url)
        assert again.returncode == 1 and "ResumeNotNeededError" in again.stderr.decode()
        assert (
            "[needs resume]"
            not in (await kittiwake("sessions", "list", "--attach", g.url)).stdout.decode()
        )


async def test_a_failed_run_shows_in_session_info_and_the_inspector(tmp_path: Path) -> None:
    def always_tools(request: llm.LLMRequest) -> list[llm.LLMEvent]:
        call = llm.ToolCall(call_id=f"c{len(request.messages)}", name="nope", input={})
        return [
            llm.StepStart(),
            call,
            llm.StepFinish(finish_reason="tool-calls", usage=llm.Usage()),
        ]

    from runtime.agents import AgentInfo

    provider = llm.ScriptedLLM(always_tools)
    agents = {"build": AgentInfo(name="build", steps=2, builtin=True)}
    async with (
        served(tmp_path, llm=provider, agents=agents) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
        await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "loop"}})
        assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
        info = (await client.get(f"/api/session/{sid}")).json()["data"]
        assert info["lastError"] == {
            "_tag": "StepLimitExceededError",
            "message": "Work remained after 2 provider turns",
        }
        history = (await client.get(f"/api/session/{sid}/history")).json()["data"]
        failed = [e for e in history if e["type"] == "session.next.step.failed"]
        assert [e["data"]["error"]["message"] for e in failed] == [
            "Work remained after 2 provider turns"
        ]
        # Kittiwake's session.run.failed takes a seq in the log: the history carries it too.
        kinds = [e["type"] for e in history]
        assert kinds[kinds.index("session.next.step.failed") + 1] == "session.run.failed"
        assert [e["durable"]["seq"] for e in history] == list(range(1, len(history) + 1))
        actors = (await client.get("/api/actors")).json()["actors"]
        (mine,) = [a for a in actors if a["id"] == sid]
        assert mine["last_error"] == "StepLimitExceededError: Work remained after 2 provider turns"
