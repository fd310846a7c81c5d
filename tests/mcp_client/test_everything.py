"""MCP's reference server, ``@modelcontextprotocol/server-everything`` (npm, pinned in
``clients/package.json``), through a real session on a served runtime and the scripted
model: its tools listed and called (roots and sampling among them), a prompt run as a
slash command, a resource listed and attached to a prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from runtime.llm import ScriptedLLM, TextPart, ToolMessage, UserMessage
from tests.execution.conftest import answer, tool_calls
from tests.mcp_client.test_routes import served

EVERYTHING = (
    Path(__file__).parents[2] / "clients" / "node_modules" / ".bin" / "mcp-server-everything"
)
DOC = "demo://resource/static/document/architecture.md"


def results(request) -> dict[str, str]:
    """The text of each tool result the provider was sent, by tool name."""
    parts = [p for x in request.messages if isinstance(x, ToolMessage) for p in x.content]
    return {p.name: "".join(c.text for c in p.content if isinstance(c, TextPart)) for p in parts}


def user_text(request) -> str:
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    return "\n".join(p.text for p in users[-1].content if isinstance(p, TextPart))


async def test_the_reference_server_through_a_session(tmp_path: Path):
    assert EVERYTHING.exists(), "make opencode installs it (clients/package.json)"
    client = ScriptedLLM([
        tool_calls(
            ("c1", "everything_echo", {"message": "kittiwake"}),
            ("c2", "everything_get-sum", {"a": 2, "b": 40}),
            ("c3", "everything_get-roots-list", {}),
            ("c4", "everything_trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 20}),
        ),
        answer("Hi from the session's model."),  # the server's sampling request
        answer("tools done"),
        answer("weather"),
        answer("read it"),
    ])  # fmt: skip
    config: dict[str, Any] = {
        "mcp": {"everything": {"type": "local", "command": [str(EVERYTHING), "stdio"]}},
        "permission": {"mcp_sampling": "allow"},
    }
    async with served(tmp_path, config, client, server="everything") as (rt, url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            sid = (await http.post("/session", json={})).json()["id"]
            tools = await http.post(
                f"/session/{sid}/message", json={"parts": [{"type": "text", "text": "go"}]}
            )
            commands = (await http.get("/command")).json()
            command = await http.post(
                f"/session/{sid}/command",
                json={"command": "everything:args-prompt", "arguments": "Lisbon Portugal"},
            )
            resources = (await http.get("/experimental/resource")).json()
            source = {"type": "resource", "clientName": "everything", "uri": DOC,
                      "text": {"value": "@architecture.md", "start": 0, "end": 16}}  # fmt: skip
            part = {"type": "file", "mime": "text/markdown", "url": DOC,
                    "filename": "architecture.md", "source": source}  # fmt: skip
            attached = await http.post(f"/session/{sid}/message", json={"parts": [part]})
    assert tools.status_code == command.status_code == attached.status_code == 200
    offered = {t.name for t in client.requests[0].tools}
    assert {"everything_echo", "everything_get-sum", "everything_get-tiny-image"} <= offered
    sampling = client.requests[1]
    assert "Say hi" in user_text(sampling) and sampling.tools == []
    answered = results(client.requests[2])
    assert answered["everything_echo"] == "Echo: kittiwake"
    assert "42" in answered["everything_get-sum"]
    assert (tmp_path / "project").as_uri() in answered["everything_get-roots-list"]
    assert "Hi from the session's model." in answered["everything_trigger-sampling-request"]
    listed = {c["name"]: c for c in commands}
    assert listed["everything:args-prompt"]["source"] == "mcp"
    assert "What's weather in Lisbon, Portugal?" in user_text(client.requests[3])
    assert f"everything:{DOC}" in resources
    read = user_text(client.requests[4])
    assert read.startswith(f"Reading MCP resource: architecture.md ({DOC})\n")
    assert len(read) > 200
