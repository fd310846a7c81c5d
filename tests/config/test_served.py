"""Configuration reaching a served runtime: real ``kittiwake serve`` subprocesses, a local
chat-completions server, no planted catalog and no API-key variable."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import h11
import httpx
import pytest
import trio

from tests.gateway.conftest import assert_valid, component, response_schema
from tests.llm.conftest import LocalServer, Reply
from tests.llm.streams import sse

from .conftest import (
    base_env,
    chat_text,
    chat_tool_call,
    free_port,
    local_provider,
    new_session,
    prompt,
    run_serve_to_exit,
    serving,
    texts,
)


@pytest.mark.parametrize(
    "source", ["global", "project", "KITTIWAKE_CONFIG", "KITTIWAKE_CONFIG_CONTENT"]
)
async def test_a_provider_only_in_configuration_answers(tmp_path, provider, source):
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"  # serve's own directory holds no configuration
    elsewhere.mkdir()
    env = base_env(tmp_path)
    document = {"model": "local/echo-1", "provider": local_provider(provider.port, "echo-1")}
    text = "// written by hand\n" + json.dumps(document, indent=2)[:-1] + ",\n}\n"  # JSONC
    if source == "global":
        (tmp_path / "xdg" / "kittiwake").mkdir(parents=True)
        (tmp_path / "xdg" / "kittiwake" / "kittiwake.jsonc").write_text(text)
    elif source == "project":
        (project / "kittiwake.jsonc").write_text(text)
    elif source == "KITTIWAKE_CONFIG":
        (tmp_path / "mine.json").write_text(text)
        env["KITTIWAKE_CONFIG"] = str(tmp_path / "mine.json")
    else:
        env["KITTIWAKE_CONFIG_CONTENT"] = text
    provider.queue(chat_text(f"hello from {source}"))
    async with serving(env, elsewhere) as served, httpx.AsyncClient(base_url=served.url) as client:
        sid = await new_session(client, project)
        events = await prompt(client, sid, "hi")
    assert texts(events) == [f"hello from {source}"]
    (request,) = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.json()["model"] == "echo-1"
    assert "authorization" not in request.headers


async def test_bash_deny_keeps_the_command_from_running(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "ran"
    (project / "kittiwake.json").write_text(
        json.dumps(
            {
                "model": "local/echo-1",
                "provider": local_provider(provider.port, "echo-1"),
                "permission": {"bash": "deny"},
            }
        )
    )
    provider.queue(
        chat_tool_call("shell", {"command": f"touch {marker}", "description": "touch"}),
        chat_text("could not"),
    )
    async with (
        serving(base_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url) as client,
    ):
        sid = await new_session(client, project)
        events = await prompt(client, sid, "touch it")
    failed = [e["data"] for e in events if e["type"] == "session.next.tool.failed"]
    assert len(failed) == 1 and failed[0]["error"]["message"] == (
        "Tool shell is not available for this request"
    )
    assert not marker.exists()
    assert texts(events) == ["could not"]
    offered = {t["function"]["name"] for t in provider.requests[0].json().get("tools", [])}
    assert "read" in offered and "shell" not in offered  # wholly denied: never offered


async def test_configured_agent_is_selectable_and_its_rules_apply(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "ran"
    (project / "kittiwake.json").write_text(
        json.dumps(
            {
                "model": "local/echo-1",
                "provider": local_provider(provider.port, "echo-1", "echo-2"),
                "agent": {
                    "reviewer": {
                        "prompt": "You are the REVIEWER.",
                        "model": "local/echo-2",
                        "permission": {"bash": "deny"},
                    }
                },
            }
        )
    )
    provider.queue(
        chat_tool_call("shell", {"command": f"touch {marker}", "description": "touch"}),
        chat_text("reviewed"),
    )
    async with (
        serving(base_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url) as client,
    ):
        agents = (await client.get("/project/current")).json()
        listed = await client.get(f"/project/{agents['id']}/agent")
        assert "reviewer" in [a["name"] for a in listed.json()]
        sid = await new_session(client, project, agent="reviewer")
        events = await prompt(client, sid, "review")
    assert texts(events) == ["reviewed"] and not marker.exists()
    first = provider.requests[0].json()
    assert "shell" not in {t["function"]["name"] for t in first.get("tools", [])}
    assert first["model"] == "echo-2"
    assert "You are the REVIEWER." in json.dumps(first["messages"][0])


async def test_patch_config_persists_and_applies_from_the_next_turn(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    (project / "kittiwake.json").write_text(
        json.dumps(
            {
                "model": "local/echo-1",
                "provider": local_provider(provider.port, "echo-1", "echo-2"),
            }
        )
    )
    provider.queue(chat_text("one"), chat_text("two"))
    async with (
        serving(base_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url) as client,
    ):
        sid = await new_session(client, project)
        assert texts(await prompt(client, sid, "first")) == ["one"]
        patched = await client.patch("/config", json={"model": "local/echo-2"})
        assert patched.status_code == 200, patched.text
        assert patched.json()["model"] == "local/echo-2"
        assert texts(await prompt(client, sid, "second")) == ["two"]
        bad = await client.patch("/config", json={"model": 7})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
        assert "model" in bad.json()["message"]
        saved = (project / "kittiwake.json").read_text()
        (project / "kittiwake.json").write_text('{"model": "local/echo-2",\n  "oops"}')
        broken = await client.get("/config")
        assert broken.status_code == 400 and "kittiwake.json:2:9" in broken.json()["message"]
        failed = await prompt(client, sid, "third")
        (step_failed,) = [e for e in failed if e["type"] == "session.next.step.failed"]
        assert "kittiwake.json:2:9" in step_failed["data"]["error"]["message"]
        (project / "kittiwake.json").write_text(saved)
    assert [r.json()["model"] for r in provider.requests] == ["echo-1", "echo-2"]
    assert json.loads((project / "kittiwake.json").read_text())["model"] == "local/echo-2"


async def test_an_agent_file_added_while_serving_is_usable_from_the_next_turn(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    (project / "kittiwake.json").write_text(
        json.dumps({"model": "local/echo-1", "provider": local_provider(provider.port, "echo-1")})
    )
    provider.queue(chat_text("one"), chat_text("two"))
    async with (
        serving(base_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url) as client,
    ):
        sid = await new_session(client, project)
        assert texts(await prompt(client, sid, "first")) == ["one"]
        folder = project / ".kittiwake" / "agent"
        folder.mkdir(parents=True)
        (folder / "helper.md").write_text("---\ndescription: helps\n---\nYou are the HELPER.\n")
        switched = await client.post(f"/api/session/{sid}/agent", json={"agent": "helper"})
        assert switched.status_code in (200, 204), switched.text
        assert texts(await prompt(client, sid, "second")) == ["two"]
    assert "HELPER" not in json.dumps(provider.requests[0].json()["messages"][0])
    assert "You are the HELPER." in json.dumps(provider.requests[1].json()["messages"][0])


async def test_config_routes_match_opencode_and_keep_secrets(tmp_path, provider):
    project = tmp_path / "project"
    project.mkdir()
    providers = local_provider(provider.port, "echo-1")
    providers["local"]["options"].update(apiKey="sk-secret-123", headers={"X-Token": "tok-456"})
    (project / "kittiwake.jsonc").write_text(
        json.dumps({"model": "local/echo-1", "provider": providers, "theme": "dark"})
    )
    (tmp_path / "xdg" / "kittiwake").mkdir(parents=True)
    (tmp_path / "xdg" / "kittiwake" / "kittiwake.json").write_text('{"username": "ann"}')
    async with (
        serving(base_env(tmp_path), project) as served,
        httpx.AsyncClient(base_url=served.url) as client,
    ):
        config = await client.get("/config")
        listed = await client.get("/config/providers")
        every = await client.get("/provider")
        global_config = await client.get("/global/config")
        patched = await client.patch("/global/config", json={"username": "bob"})
    assert "not supported" in served.errors and "theme" in served.errors  # a diagnostic
    for answer in (config, listed, every, global_config, patched):
        assert answer.status_code == 200, answer.text
        assert "sk-secret-123" not in answer.text and "tok-456" not in answer.text
    assert_valid(config.json(), response_schema("/config", "get", 200))
    assert_valid(listed.json(), response_schema("/config/providers", "get", 200))
    assert_valid(every.json(), response_schema("/provider", "get", 200))
    assert_valid(global_config.json(), component("Config"))
    body = config.json()
    assert body["username"] == "ann" and body["model"] == "local/echo-1"
    assert body["provider"]["local"]["options"]["apiKey"] == "[redacted]"
    local = next(p for p in listed.json()["providers"] if p["id"] == "local")
    assert local["source"] == "config" and "echo-1" in local["models"]
    assert "local" in every.json()["connected"]
    assert listed.json()["default"]["local"] == "echo-1"
    assert patched.json() == {"username": "bob"}
    assert json.loads((tmp_path / "xdg" / "kittiwake" / "kittiwake.json").read_text()) == {
        "username": "bob"
    }


async def test_unusable_configuration_stops_serve_with_exit_2(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    env = base_env(tmp_path)
    (project / "kittiwake.json").write_text('{\n  "model": "a/b"\n  "small_model": "a/c"\n}\n')
    done = await run_serve_to_exit(env, project)
    assert done.returncode == 2
    (line,) = done.stderr.decode().strip().splitlines()
    assert line.startswith(f"kittiwake: {project / 'kittiwake.json'}:3:3: ")
    (project / "kittiwake.json").write_text('{"agent": {"build": {"steps": "many"}}}')
    done = await run_serve_to_exit(env, project)
    assert done.returncode == 2
    assert "agent.build.steps: Expected `int`" in done.stderr.decode()
    (project / "kittiwake.json").unlink()
    done = await run_serve_to_exit({**env, "KITTIWAKE_CONFIG_CONTENT": "{oops"}, project)
    assert done.returncode == 2
    assert done.stderr.decode().startswith("kittiwake: KITTIWAKE_CONFIG_CONTENT:1:2: ")


async def test_serve_listens_where_the_configuration_says(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    port = free_port()
    (project / "kittiwake.json").write_text(
        json.dumps({"server": {"port": port, "hostname": "127.0.0.1"}})
    )
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "gateway", "serve"],
        cwd=str(project), env=base_env(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        out = b""
        with trio.fail_after(30):
            async for chunk in process.stdout:
                out += chunk
                if b"kittiwake: serving" in out:
                    break
        assert f"kittiwake: serving http://127.0.0.1:{port} ".encode() in out
    finally:
        process.terminate()
        with trio.fail_after(20):
            await process.wait()


class _CountingServer(LocalServer):
    """The local provider, counting the answers it is streaming at once."""

    def __init__(self) -> None:
        super().__init__()
        self.streaming = 0
        self.most = 0

    async def _respond(self, conn: h11.Connection, stream: trio.SocketStream, reply: Reply) -> None:
        self.streaming += 1
        self.most = max(self.most, self.streaming)
        try:
            await super()._respond(conn, stream, reply)
        finally:
            self.streaming -= 1


def _slow_text(text: str, seconds: float) -> Reply:
    """A chat-completions stream answering *text*, its end *seconds* after its start."""
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    delta = {"index": 0, "delta": {"role": "assistant", "content": text}}
    end = {"index": 0, "delta": {}, "finish_reason": "stop"}
    first, last = sse({**chunk, "choices": [delta]}), sse({**chunk, "choices": [end]}, done=True)
    return Reply(chunks=[first, last], delay=seconds)


async def test_serve_streams_at_most_provider_requests_answers_at_once(tmp_path, nursery):
    local = _CountingServer()
    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, local.handle, 0, host="127.0.0.1")
    )
    local.port = listeners[0].socket.getsockname()[1]
    local.responder = lambda request: _slow_text("late", 1.0)
    env = base_env(tmp_path)
    document = {"model": "local/echo-1", "provider": local_provider(local.port, "echo-1")}
    env["KITTIWAKE_CONFIG_CONTENT"] = json.dumps(document)
    project = tmp_path / "project"
    project.mkdir()
    answers: list[list[str]] = []

    async def ask(client: httpx.AsyncClient, sid: str) -> None:
        answers.append(texts(await prompt(client, sid, "hi")))

    args = ["--provider-requests", "2"]
    async with serving(env, project, args=args) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            sids = [await new_session(client, project) for _ in range(5)]
            async with trio.open_nursery() as prompts:
                for sid in sids:
                    prompts.start_soon(ask, client, sid)
    assert answers == [["late"]] * 5  # every one answered, two at a time at most
    assert len(local.requests) == 5 and local.most == 2

    done = await run_serve_to_exit(env, project, args=["--provider-requests", "0"])
    assert done.returncode == 2
    assert b"0 is not a number of requests (1 or more)" in done.stderr
