"""A SessionActor that crashes is restarted by its supervisor and rebuilds from storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.session._session import SessionActor
from actors.session._session_messages import Wake
from runtime import llm
from tests.execution.conftest import answer, eventually, prompt, running


async def test_a_crashed_session_actor_restarts_and_drains_its_inbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = SessionActor._handle
    crashes: list[str] = []

    def crash_once(self: SessionActor, message: Any, nursery: Any) -> None:
        if isinstance(message, Wake) and not crashes:
            crashes.append(self.session_id)
            raise RuntimeError("injected crash while handling a wake")
        original(self, message, nursery)

    monkeypatch.setattr(SessionActor, "_handle", crash_once)
    client = llm.ScriptedLLM([answer("after the restart")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("survive this"))
        await eventually(lambda: len(client.requests) == 1)
        await rt.sessions.wait_idle(sid)
        actor = rt.execution.active_sessions()[0]
        assert crashes == [sid]
        assert actor.statistics().restarts == 1
        assert "RuntimeError" in (actor.statistics().last_death_cause or "")
        context = await rt.sessions.context(sid)
    assert [type(m).__name__ for m in context] == ["UserMessage", "AssistantMessage"]
