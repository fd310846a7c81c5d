"""OpenCode's MCP routes and event on a served runtime (real Hypercorn on 127.0.0.1),
their answers checked against OpenCode's OpenAPI document."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from actors import Runtime
from gateway import Server, serve
from runtime.llm import FilePart, ScriptedLLM, TextPart, UserMessage
from tests.execution.conftest import answer as scripted_answer
from tests.gateway.conftest import assert_valid, component, response_schema
from tests.gateway.v1 import v1_stream
from tests.mcp_client.conftest import (
    SDK_SSE_GENERATORS,
    connected,
    http_server,
    local,
    mcp_runtime,
)


async def _unauthorized(stream: trio.SocketStream) -> None:
    """An HTTP server that answers every request 401 (a server wanting sign-in)."""
    await stream.receive_some(65536)
    body = b'{"error":"unauthorized"}'
    await stream.send_all(
        b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
        b"www-authenticate: Bearer\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
        % (len(body), body)
    )


@asynccontextmanager
async def served(
    tmp_path: Path, config: dict[str, Any], llm: ScriptedLLM | None = None, server: str = "test"
) -> AsyncIterator[tuple[Runtime, str]]:
    """A runtime served on 127.0.0.1 whose Location (``tmp_path/project``) has *config*,
    once its MCP server *server* is connected."""
    async with mcp_runtime(tmp_path, config, llm or ScriptedLLM([])) as (rt, work):
        async with trio.open_nursery() as nursery:
            served: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
            await connected(rt, work, server)
            try:
                yield rt, served.url
            finally:
                served.stop()


@SDK_SSE_GENERATORS
async def test_status_add_connect_and_disconnect_in_opencodes_shapes(tmp_path: Path):
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _unauthorized, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        config = {
            "mcp": {
                "test": local(),
                "off": {"enabled": False},
                "broken": {"type": "local", "command": ["no-such-mcp-server"]},
                "locked": {"type": "remote", "url": f"http://127.0.0.1:{port}/mcp"},
                "closed": {"type": "remote", "url": f"http://127.0.0.1:{port}/mcp",
                           "oauth": False},
            }
        }  # fmt: skip
        async with served(tmp_path, config) as (rt, url), http_server() as base:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                first = await http.get("/mcp")
                add = {"name": "web", "config": {"type": "remote", "url": f"{base}/mcp"}}
                added = await http.post("/mcp", json=add)
                bad = await http.post("/mcp", json={"name": "x", "config": {"type": "local"}})
                off = await http.post("/mcp/test/disconnect")
                after_off = await http.get("/mcp")
                on = await http.post("/mcp/test/connect")
                after_on = await http.get("/mcp")
                missing = await http.post("/mcp/nope/connect")
                also_missing = await http.post("/mcp/nope/disconnect")
        nursery.cancel_scope.cancel()
    assert first.status_code == 200
    assert_valid(first.json(), response_schema("/mcp", "get", 200))
    statuses = first.json()
    assert statuses["test"] == {"status": "connected"}
    assert statuses["off"] == {"status": "disabled"}
    assert statuses["broken"] == {
        "status": "failed",
        "error": "command not found: no-such-mcp-server",
    }
    assert statuses["locked"] == {"status": "needs_auth"}
    assert statuses["closed"]["status"] == "failed" and "401" in statuses["closed"]["error"]
    assert added.status_code == 200
    assert_valid(added.json(), response_schema("/mcp", "post", 200))
    assert added.json()["web"] == {"status": "connected"} and len(added.json()) == 6
    assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
    assert "x" not in after_off.json()
    assert (off.status_code, off.json()) == (200, True)
    assert after_off.json()["test"] == {"status": "disabled"}
    assert (on.status_code, on.json()) == (200, True)
    assert after_on.json()["test"] == {"status": "connected"}
    for answer in (missing, also_missing):
        assert answer.status_code == 404
        assert_valid(answer.json(), component("McpServerNotFoundError"))
        assert answer.json()["name"] == "nope"


async def test_resources_commands_and_the_tools_changed_event(tmp_path: Path):
    async with served(tmp_path, {"mcp": {"test": local()}}) as (rt, url):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            resources = await http.get("/experimental/resource")
            commands = await http.get("/command")
        async with v1_stream(url) as events:
            server = await connected(rt, Path(tmp_path / "project"))
            await server.call("grow", {})
            changed = await events.until(lambda p: p["type"] == "mcp.tools.changed")
        async with v1_stream(url, "/global/event") as events:
            await server.call("grow", {})
            global_changed = await events.until(lambda p: p["type"] == "mcp.tools.changed")
    assert resources.status_code == 200
    assert_valid(resources.json(), response_schema("/experimental/resource", "get", 200))
    assert resources.json() == {
        "test:notes://readme": {
            "name": "readme", "uri": "notes://readme", "description": "The project notes.",
            "mimeType": "text/plain", "client": "test",
        },
        "test:pictures://dot": {
            "name": "dot", "uri": "pictures://dot", "description": "A 1x1 PNG.",
            "mimeType": "image/png", "client": "test",
        },
    }  # fmt: skip
    review = next(c for c in commands.json() if c["name"] == "test:review")
    assert_valid(review, component("Command"))
    assert (review["source"], review["hints"]) == ("mcp", ["$1", "$2"])
    assert changed["properties"] == {"server": "test"}
    assert_valid(changed, component("EventMcpToolsChanged"))
    assert global_changed["properties"] == {"server": "test"}


async def test_a_resource_attached_to_a_prompt_is_read_into_it(tmp_path: Path):
    client = ScriptedLLM([scripted_answer("read")])

    def resource(uri: str, name: str, mime: str) -> dict[str, Any]:
        source = {"type": "resource", "clientName": "test", "uri": uri,
                  "text": {"value": f"@{name}", "start": 0, "end": len(name) + 1}}  # fmt: skip
        return {"type": "file", "mime": mime, "url": uri, "filename": name, "source": source}

    async with served(tmp_path, {"mcp": {"test": local()}}, client) as (rt, url):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            sid = (await http.post("/session", json={})).json()["id"]
            parts = [
                {"type": "text", "text": "What do these say?"},
                resource("notes://readme", "readme", "text/plain"),
                resource("pictures://dot", "dot", "image/png"),
                resource("notes://missing", "missing", "text/plain"),
            ]
            answered = await http.post(f"/session/{sid}/message", json={"parts": parts})
    assert answered.status_code == 200, answered.text
    (user,) = [m for m in client.requests[0].messages if isinstance(m, UserMessage)]
    text = "".join(p.text for p in user.content if isinstance(p, TextPart))
    assert text.startswith("What do these say?\nReading MCP resource: readme (notes://readme)\n")
    assert "\nRemember the milk.\nReading MCP resource: dot (pictures://dot)\n" in text
    assert "Failed to read MCP resource missing: MCP error" in text
    (image,) = [p for p in user.content if isinstance(p, FilePart)]
    assert image.mime == "image/png" and image.url.startswith("data:image/png;base64,iVBOR")


async def test_a_directory_with_a_nul_byte_is_a_bad_request(tmp_path: Path):
    async with served(tmp_path, {"mcp": {"test": local()}}) as (rt, url):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            answers = [
                await http.post("/mcp/test/connect", params={"directory": "\x00"}),
                await http.get("/mcp", headers={"x-opencode-directory": "%00"}),
            ]
        assert rt.execution.location_for(str(tmp_path / "project")).mcp.servers["test"]
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert answer.json()["_tag"] == "InvalidRequestError"
