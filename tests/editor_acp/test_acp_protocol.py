"""The JSON-RPC surface of ``kittiwake acp`` read line by line: bad input is answered with a
JSON-RPC error and the agent goes on; standard output carries protocol messages only; with
no provider credentials the session methods answer "auth required"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import trio

from runtime import open_runtime
from tests.opencode.harness import Provider

from .harness import Setup, published


def run_lines(setup: Setup, lines: list[str], *, env: dict | None = None) -> tuple[list, str, int]:
    """Feed *lines* to ``kittiwake acp`` and close its input; its output's messages (each
    line must be one JSON object), its standard error and its exit status."""
    done = subprocess.run(
        setup.argv(), input="".join(line + "\n" for line in lines).encode(),
        capture_output=True, cwd=setup.project, env=env or setup.env, timeout=60, check=False,
    )  # fmt: skip
    messages = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert all(isinstance(m, dict) and m["jsonrpc"] == "2.0" for m in messages), messages
    for message in messages:
        published().validate(message)
    return messages, done.stderr.decode(), done.returncode


def request(id: int, method: str, params: dict | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}})


def test_bad_lines_get_errors_and_the_agent_goes_on(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    lines = [
        "this is not json",
        "[1, 2]",
        json.dumps({"jsonrpc": "1.0", "id": 1, "method": "initialize"}),
        request(2, "no/such/method"),
        json.dumps({"jsonrpc": "2.0", "method": "no/such/notification"}),
        request(3, "initialize", {"clientCapabilities": {}}),
        request(4, "session/prompt", {"sessionId": "ses_nosuch", "prompt": []}),
        request(
            5,
            "session/load",
            {"sessionId": "ses_1a2b3c4d5e6f7a8b9c0d1e2f3a", "cwd": "/", "mcpServers": []},
        ),  # fmt: skip
        request(6, "session/new", {"cwd": "relative/dir", "mcpServers": []}),
        request(7, "session/cancel", {"sessionId": "ses_nosuch"}),
        "",
        request(8, "initialize", {"protocolVersion": 1}),
        request(9, "session/list"),
    ]
    messages, stderr, status = run_lines(setup, lines)
    assert status == 0, stderr
    by_id = {m.get("id"): m for m in messages if m.get("id") is not None}
    unnamed = [m["error"]["code"] for m in messages if m.get("id") is None]
    assert sorted(unnamed) == [-32700, -32600]
    assert by_id[1]["error"]["code"] == -32600
    assert by_id[2]["error"] == {"code": -32601, "message": "Method not found: no/such/method"}
    assert by_id[3]["error"]["code"] == -32602  # protocolVersion is required
    assert by_id[4]["error"]["code"] in (-32002, -32602)
    assert by_id[5]["error"]["code"] == -32002
    assert by_id[6]["error"]["code"] == -32602  # not an absolute directory
    assert by_id[7]["error"]["code"] == -32601  # a notification sent as a request
    assert by_id[8]["result"]["protocolVersion"] == 1
    assert by_id[9]["result"] == {"sessions": []}
    assert len(messages) == 11  # nothing else: no answer to notifications


def test_without_credentials_sessions_need_authentication(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    env = {k: v for k, v in setup.env.items() if k not in ("LOCAL_API_KEY", "KITTIWAKE_MODEL")}
    lines = [
        request(1, "initialize", {"protocolVersion": 1}),
        request(2, "authenticate", {"methodId": "kittiwake-auth"}),
        request(3, "authenticate", {"methodId": "other"}),
        request(4, "session/new", {"cwd": str(setup.project), "mcpServers": []}),
    ]
    messages, stderr, status = run_lines(setup, lines, env=env)
    assert status == 0, stderr
    by_id = {m["id"]: m for m in messages}
    assert by_id[1]["result"]["authMethods"][0]["id"] == "kittiwake-auth"
    assert by_id[2]["error"]["code"] == -32000
    assert "kittiwake auth login" in by_id[2]["error"]["message"]
    assert by_id[3]["error"]["code"] == -32602
    assert by_id[4]["error"]["code"] == -32000
    assert "no LLM provider is configured" in stderr  # the start-up lines go to stderr


def test_a_held_data_dir_is_one_line_on_stderr(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)

    async def hold() -> tuple[list, str, int]:
        async with open_runtime(data_dir=setup.data):
            return await trio.to_thread.run_sync(
                lambda: run_lines(setup, [request(1, "initialize", {"protocolVersion": 1})])
            )

    messages, stderr, status = trio.run(hold)
    assert status == 1 and messages == []
    assert stderr.strip().splitlines()[-1].startswith(f"kittiwake: the data dir {setup.data}")


def test_help_lists_the_command(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    done = subprocess.run(
        [*setup.argv(), "--help"], capture_output=True, env=setup.env, timeout=60, check=False
    )
    assert done.returncode == 0
    assert "Agent Client Protocol" in done.stdout.decode()
    assert "--cwd" in done.stdout.decode() and Path(setup.data).exists()
