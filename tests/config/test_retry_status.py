"""A provider's retryable failure shows on OpenCode's V1 streams as the ``retry`` status
(``kittiwake serve`` in a subprocess, a local chat-completions server answering 429 once)."""

from __future__ import annotations

import json

import httpx

from tests.gateway.v1 import v1_stream
from tests.llm.conftest import Reply

from .conftest import base_env, chat_text, local_provider, serving


async def test_a_retried_request_shows_the_retry_status_then_busy_then_idle(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    document = {"model": "local/echo-1", "provider": local_provider(provider.port, "echo-1")}
    (project / "kittiwake.json").write_text(json.dumps(document))
    overloaded = Reply(
        status=429, headers=[("retry-after", "0")], content_type="application/json",
        json_body={"error": {"message": "slow down", "type": "rate_limit_error"}},
    )  # fmt: skip
    provider.queue(overloaded, chat_text("after a retry"))
    async with (
        serving(base_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url) as client,
        v1_stream(served.url, "/global/event") as events,
    ):
        sid = (await client.post("/session", json={})).json()["id"]
        body = {"agent": "build", "parts": [{"type": "text", "text": "hi"}]}
        answer = await client.post(f"/session/{sid}/message", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["parts"][1]["text"] == "after a retry"
        await events.until(
            lambda p: p["type"] == "session.status" and p["properties"]["status"]["type"] == "idle"
        )
    statuses = [p["properties"]["status"] for p in events.of("session.status", sid)]
    assert [s["type"] for s in statuses] == ["busy", "retry", "busy", "idle"]
    retry = statuses[1]
    assert retry["attempt"] == 1 and "slow down" in retry["message"]
    assert retry["next"] > 0
    assert len(provider.requests) == 2
