"""Defaults a served runtime chooses by itself: real ``kittiwake serve`` subprocesses over the
fixture catalog, a local chat-completions server for the provider that needs no key."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import httpx
import pytest
import trio

from runtime.agents import CODING_PROMPT
from runtime.titles import TITLE_PROMPT

from .conftest import base_env, chat_text, local_provider, new_session, prompt, serving, texts

SAMPLE = Path("/work/shared/fixtures/models-dev-sample.json")


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {**base_env(tmp_path), **more}
    data = Path(env["KITTIWAKE_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE, data / "models-dev.json")  # a fresh cache: the fixture is the catalog
    return env


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        ("OPENAI_API_KEY", "openai, model gpt-5.5"),
        ("ANTHROPIC_API_KEY", "anthropic, model claude-sonnet-5"),
        ("GEMINI_API_KEY", "google, model gemini-2.5-pro"),
    ],
)
async def test_one_key_serves_a_current_tool_calling_default(tmp_path, variable, expected):
    project = tmp_path / "project"
    project.mkdir()
    env = _env(tmp_path, **{variable: "sk-test"})
    async with serving(env, project) as served, httpx.AsyncClient(base_url=served.url) as client:
        shown = (await client.get("/config")).json()
        providers = (await client.get("/config/providers")).json()
    provider, _, model = expected.partition(", model ")
    assert f"kittiwake: using provider {expected}" in served.errors
    assert shown["model"] == f"{provider}/{model}"
    assert providers["default"][provider] == model
    assert providers["default"]["openai"] == "gpt-5.5"  # never the image model listed first


async def test_a_keyless_provider_is_the_default_and_needs_a_small_model_for_titles(
    tmp_path, provider
):
    project = tmp_path / "project"
    project.mkdir()
    config = {"provider": local_provider(provider.port, "coder-1")}
    (project / "kittiwake.json").write_text(json.dumps(config))
    provider.queue(chat_text("done"))
    async with (
        serving(_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        sid = await new_session(client, project)
        events = await prompt(client, sid, "tidy the README")
        info = (await client.get(f"/api/session/{sid}")).json()["data"]
    assert "kittiwake: using provider local, model coder-1" in served.errors
    assert texts(events) == ["done"]
    # An unpriced local provider has no small model: no title request competes with the turn.
    (request,) = provider.requests
    body = request.json()
    assert body["model"] == "coder-1"
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith(CODING_PROMPT[:200])
    assert info["title"].startswith("Session ")


async def _read_events(client: httpx.AsyncClient, frames: trio.MemorySendChannel[dict]) -> None:
    async with client.stream("GET", "/api/event") as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                frames.send_nowait(json.loads(line[6:]))


async def test_a_configured_small_model_titles_the_session(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    config = {
        "provider": local_provider(provider.port, "coder-1", "tiny"),
        "small_model": "local/tiny",
    }
    (project / "kittiwake.json").write_text(json.dumps(config))
    # The turn and the title request run side by side: both get the same answer.
    provider.queue(chat_text("Tidy the README"), chat_text("Tidy the README"))
    async with (
        serving(_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        sid = await new_session(client, project)
        frames, received = trio.open_memory_channel[dict](math.inf)
        async with trio.open_nursery() as reading:
            reading.start_soon(_read_events, client, frames)
            assert (await received.receive())["type"] == "server.connected"
            events = await prompt(client, sid, "the README is a mess")
            with trio.fail_after(20):
                while (frame := await received.receive())["type"] != "session.updated":
                    pass
            reading.cancel_scope.cancel()
        info = (await client.get(f"/api/session/{sid}")).json()["data"]
    assert "kittiwake: using provider local, model coder-1" in served.errors
    assert texts(events) == ["Tidy the README"]
    assert frame["properties"]["info"]["title"] == info["title"] == "Tidy the README"
    assert frame["properties"]["info"]["directory"] == str(project)
    by_model = {r.json()["model"]: r.json() for r in provider.requests}
    assert set(by_model) == {"coder-1", "tiny"}
    assert by_model["tiny"]["messages"][0] == {"role": "system", "content": TITLE_PROMPT}
    assert "tools" not in by_model["tiny"]
    assert "the README is a mess" in by_model["tiny"]["messages"][1]["content"]
