"""``kittiwake serve`` SIGKILLed during a compaction and after one: the boundary and the
new Context Epoch's baseline are what the durable record says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio

from tests.config.conftest import base_env, serving

from .conftest import ChatMock, history, local_provider, new_session, start_mock


def _project(tmp_path: Path, mock: ChatMock) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    config = {"model": "local/small", "provider": local_provider(mock, output=500)}
    (project / "kittiwake.json").write_text(json.dumps(config))
    return project


async def _prompt(client: httpx.AsyncClient, sid: str, text: str, *, wait: bool = True) -> None:
    answer = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}})
    assert answer.status_code == 200, answer.text
    if wait:
        assert (await client.post(f"/api/session/{sid}/wait", timeout=30)).status_code == 204


async def _kill(process: trio.Process) -> None:
    process.kill()
    with trio.fail_after(10):
        await process.wait()


def _leading_system(body: dict[str, Any]) -> str:
    """The system messages a request starts with (the agent prompt and the baseline)."""
    leading = []
    for message in body["messages"]:
        if message["role"] != "system":
            break
        leading.append(message["content"])
    return json.dumps(leading)


def _text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


async def test_sigkill_during_a_compaction_leaves_the_previous_boundary(tmp_path):
    async with trio.open_nursery() as nursery:
        mock = await start_mock(nursery, 100_000)
        project = _project(tmp_path, mock)
        env = base_env(tmp_path)
        async with serving(env, project) as served:
            async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
                sid = await new_session(client, project)
                await _prompt(client, sid, "PROMPT-0 FACT-a")
                await _prompt(client, sid, "PROMPT-1 FACT-b")
                mock.hold_summary = True
                assert (await client.post(f"/api/session/{sid}/compact")).status_code == 204
                with trio.fail_after(10):
                    await mock.held.wait()  # compaction.started is durable before the request
                await _kill(served.process)
        mock.hold_summary = False
        async with serving(env, project) as served:
            async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
                events = await history(client, sid)
                context = (await client.get(f"/api/session/{sid}/context")).json()["data"]
                await _prompt(client, sid, "PROMPT-2")
                info = (await client.get(f"/api/session/{sid}")).json()["data"]
        nursery.cancel_scope.cancel()
    kinds = [e["type"] for e in events]
    assert "session.next.compaction.started" in kinds
    assert "session.next.compaction.ended" not in kinds
    assert [m["type"] for m in context] == ["user", "assistant", "user", "assistant"]
    assert "lastError" not in info
    last = json.dumps(mock.turns[-1]["messages"])
    assert "PROMPT-0" in last and "PROMPT-2" in last and "<conversation-checkpoint>" not in last


async def test_sigkill_after_compaction_ended_reuses_the_new_baseline_verbatim(tmp_path):
    async with trio.open_nursery() as nursery:
        mock = await start_mock(nursery, 100_000)
        project = _project(tmp_path, mock)
        env = base_env(tmp_path)
        async with serving(env, project) as served:
            async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
                sid = await new_session(client, project)
                await _prompt(client, sid, "PROMPT-0 FACT-a")
                (project / "AGENTS.md").write_text("Use tabs. VERSION-ONE\n")
                await _prompt(client, sid, "PROMPT-1 FACT-b")
                before = mock.turns[-1]
                assert "VERSION-ONE" not in _leading_system(before)  # admitted mid-conversation
                assert "VERSION-ONE" in _text(before)
                assert (await client.post(f"/api/session/{sid}/compact")).status_code == 204
                assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
                mock.hold_turn = True
                await _prompt(client, sid, "PROMPT-2", wait=False)
                with trio.fail_after(10):
                    await mock.held.wait()
                renewed = mock.turns[-1]
                await _kill(served.process)
        # A fresh baseline holds the instructions; the earlier System message left history.
        assert "VERSION-ONE" in _leading_system(renewed)
        assert _text(renewed).count("VERSION-ONE") == 1
        (project / "AGENTS.md").write_text("Use spaces. VERSION-TWO\n")
        mock.hold_turn = False
        async with serving(env, project) as served:
            async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
                await _prompt(client, sid, "PROMPT-3")
                events = await history(client, sid)
        nursery.cancel_scope.cancel()
    after = mock.turns[-1]
    assert _leading_system(after) == _leading_system(renewed)  # verbatim, across the restart
    assert "VERSION-TWO" in _text(after) and "VERSION-TWO" not in _leading_system(after)
    assert [e["type"] for e in events].count("session.next.compaction.ended") == 1
    assert "<conversation-checkpoint>" in json.dumps(mock.turns[-1]["messages"])
