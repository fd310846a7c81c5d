"""A generated session title over HTTP: ``session.updated`` on ``/api/event``, the title in
``GET /api/session/{id}`` and in OpenCode's session list."""

from __future__ import annotations

import json
import math
from functools import partial

import httpx
import trio

from gateway import serve
from runtime import ModelRef, open_runtime
from runtime.llm import LLMEvent, LLMRequest, ScriptedLLM
from runtime.titles import TITLE_PROMPT

from .conftest import answer, assert_valid, component


def script(request: LLMRequest) -> list[LLMEvent]:
    if request.system == [TITLE_PROMPT]:
        return answer("Title: Tidy the README", chunks=3)
    return answer("done")


async def _read_events(http: httpx.AsyncClient, frames: trio.MemorySendChannel[dict]) -> None:
    async with http.stream("GET", "/api/event") as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                frames.send_nowait(json.loads(line[6:]))


async def test_the_generated_title_is_an_event_and_in_session_info(tmp_path):
    client = ScriptedLLM(script)
    small = ModelRef(id="mini", provider_id="lab")
    async with (
        open_runtime(
            data_dir=tmp_path / "data", llm=client, default_model=ModelRef(id="big", provider_id="lab"),
            title_model=lambda model: small,
        ) as rt,
        trio.open_nursery() as nursery,
    ):  # fmt: skip
        server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=tmp_path))
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
                sid = (await http.post("/api/session", json={})).json()["data"]["id"]
                placeholder = (await http.get(f"/api/session/{sid}")).json()["data"]["title"]
                seen: list[dict] = []
                frames, received = trio.open_memory_channel[dict](math.inf)
                async with trio.open_nursery() as reading:
                    # Read until cancelled, never leaving the stream at a yield: a
                    # cancellation inside the read closes every generator under it.
                    reading.start_soon(_read_events, http, frames)
                    with trio.fail_after(10):
                        while not any(e["type"] == "session.updated" for e in seen):
                            seen.append(await received.receive())
                            if len(seen) == 1:
                                await http.post(
                                    f"/api/session/{sid}/prompt",
                                    json={"prompt": {"text": "the README is a mess"}},
                                )
                    reading.cancel_scope.cancel()
                updated = next(e for e in seen if e["type"] == "session.updated")
                assert_valid(updated, component("EventSessionUpdated"))  # OpenCode's shape
                assert updated["properties"]["sessionID"] == sid
                assert updated["properties"]["info"]["title"] == "Tidy the README"
                info = (await http.get(f"/api/session/{sid}")).json()["data"]
                assert placeholder.startswith("Session ") and info["title"] == "Tidy the README"
                project = (await http.get("/project/current")).json()["id"]
                listed = (await http.get(f"/project/{project}/session")).json()
                assert [s["title"] for s in listed if s["id"] == sid] == ["Tidy the README"]
        finally:
            server.stop()
    assert [r.model.model_id for r in client.requests].count("mini") == 1
