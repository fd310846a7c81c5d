"""Plugins of a served runtime: ``GET /plugin`` (real Hypercorn on 127.0.0.1) and
``kittiwake serve`` refusing to serve when a required plugin failed (a real subprocess)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import trio

from gateway import Server, serve
from runtime.llm import ScriptedLLM
from runtime.plugins import hookimpl
from tests.config.conftest import base_env, run_serve_to_exit
from tests.execution.conftest import answer, prompt, tool_calls
from tests.gateway.v1 import v1_stream
from tests.plugins.conftest import Recorder, plugin_runtime, session
from tests.plugins.test_isolation import FAST, Hanging, Unknown
from tests.plugins.test_isolation import Raising as RaisingBefore

REQUIRED_FILE = """
from runtime.plugins import hookimpl

required = True

def plugin(context, options):
    raise RuntimeError("cannot reach the licence server")
"""


class Raising:
    name = "raising"

    @hookimpl
    def tool(self) -> list[Any]:
        raise RuntimeError("no tools today")


def _schema(doc: dict[str, Any], path: str) -> dict[str, Any]:
    answer = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
    return {**answer["schema"], "components": doc.get("components", {})}


async def test_get_plugin_lists_each_plugin_with_its_state_hooks_and_last_error(
    tmp_path: Path,
) -> None:
    plugins = [Recorder(), Unknown(), Raising()]
    async with plugin_runtime(tmp_path, ScriptedLLM([]), plugins=plugins) as (rt, work):
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                listed = await http.get("/plugin")
                elsewhere = await http.get("/plugin", params={"directory": "relative/dir"})
                doc = (await http.get("/doc")).json()
            server.stop()
    assert listed.status_code == 200, listed.text
    body = listed.json()
    jsonschema.Draft202012Validator(_schema(doc, "/plugin")).validate(body)
    assert [(p["name"], p["source"], p["state"]) for p in body] == [
        ("recorder", "embedded", "ready"), ("unknown", "embedded", "failed"),
        ("raising", "embedded", "ready"),
    ]  # fmt: skip
    recorder, unknown, raising = body
    assert recorder["hooks"] == ["permission_ask", "tool_execute_after", "tool_execute_before"]
    assert recorder["error"] is None and recorder["required"] is False
    assert "unknown hook 'tool_excute_before'" in unknown["error"]
    assert raising["error"] == "tool: RuntimeError: no tools today" and raising["errors"] == 1
    assert elsewhere.status_code == 400 and elsewhere.json()["_tag"] == "InvalidRequestError"


async def test_serve_says_in_one_line_that_a_required_plugin_failed_and_exits(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / ".kittiwake" / "plugins").mkdir(parents=True)
    (project / ".kittiwake" / "plugins" / "licence.py").write_text(REQUIRED_FILE)
    done = await run_serve_to_exit(base_env(tmp_path), project)
    assert done.returncode == 1, done.stderr.decode()
    said = [line for line in done.stderr.decode().splitlines() if "licence" in line]
    assert said[-1] == (
        "kittiwake: required plugin failed, not serving: licence: load: RuntimeError: "
        "cannot reach the licence server"
    )
    assert [line for line in said if line.startswith("kittiwake:")] == said[-1:]
    assert b"serving" not in done.stdout


async def test_a_failing_hook_is_published_on_the_event_stream_and_the_turn_completes(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("a\n")
    client = ScriptedLLM([tool_calls(("c1", "read", {"filePath": "a.txt"})), answer("read it")])
    plugins = [RaisingBefore(), Hanging()]
    async with plugin_runtime(tmp_path, client, plugins=plugins, plugin_limits=FAST) as (
        rt,
        work,
    ):
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
            async with v1_stream(server.url) as events:
                sid = await session(rt, work)
                await rt.sessions.prompt(sid, prompt=prompt("go"))
                await rt.sessions.wait_idle(sid)
                toasts = [
                    await events.until(lambda p, n=name: n in str(p["properties"]))
                    for name in ("plugin raising", "plugin hanging")
                ]
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                listed = {p["name"]: p for p in (await http.get("/plugin")).json()}
            server.stop()
        history = await rt.sessions.context(sid)
    # OpenCode has no plugin.error: its streams carry the session.error its TUI toasts
    assert [(t["type"], t["properties"]) for t in toasts] == [
        ("session.error", {"error": {"name": "UnknownError", "data": {
            "message": "plugin raising failed in tool_execute_before: RuntimeError: boom"}}}),
        ("session.error", {"error": {"name": "UnknownError", "data": {
            "message": "plugin hanging failed in permission_ask: timed out after 0.2 s"}}}),
    ]  # fmt: skip
    assert listed["raising"]["error"] == "tool_execute_before: RuntimeError: boom"
    assert listed["hanging"]["error"] == "permission_ask: timed out after 0.2 s"
    assert "read it" in str(history[-1])  # the turn completed, the read ran
    assert len(client.requests) == 2
