"""``kittiwake tui``: OpenCode's terminal UI, found on PATH, on a server it starts (and stops
when the UI exits) or on the ``kittiwake serve`` holding the data dir; without ``opencode``
on PATH, one line naming the npm package and a non-zero exit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import msgspec
import pytest

from storage import EventStore
from tests.gateway.conftest import assert_valid, response_schema

from .conftest import EventLog
from .harness import CLIENTS, Kittiwake, Provider, Tmux, client_env


def _with_opencode(env: dict[str, str]) -> dict[str, str]:
    return {**env, "PATH": f"{CLIENTS / '.bin'}{os.pathsep}{env['PATH']}"}


def _tui(tmp: Path, cwd: Path, env: dict[str, str], status: Path) -> Tmux:
    """``kittiwake tui`` in tmux, in *cwd*; its exit status lands in *status* (written
    aside and renamed, so the file never exists empty)."""
    line = f"cd {cwd} && {sys.executable} -m gateway tui; echo $? > {status}.new; mv {status}.new {status}"
    return Tmux(tmp, ["sh", "-c", line], env)


def _ask(ui: Tmux, text: str) -> None:
    ui.type(text)
    ui.wait_for(lambda s: text in s, 20, "the typed prompt")
    ui.keys("Enter")


def _exit(ui: Tmux, status: Path) -> str:
    """Type ``/exit`` and return the command's exit status once it ended."""
    ui.type("/exit")
    ui.wait_for(lambda s: "Exit the app" in s, 20, "the /exit command")
    ui.keys("Enter")
    deadline = time.monotonic() + 60
    while not status.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return status.read_text().strip()


def test_tui_serves_the_data_dir_for_the_ui_and_stops_with_it(provider: Provider, tmp_path):
    setup = Kittiwake(tmp_path, provider)  # the project, its configuration, the environment
    data = tmp_path / "data"
    status = tmp_path / "status"
    ui = _tui(tmp_path, setup.project, _with_opencode(setup.env), status)
    events: EventLog | None = None
    try:
        ui.wait_for(lambda s: "Ask anything" in s and "Mock One" in s, 60, "the home screen")
        serving = msgspec.json.decode((data / "serving.json").read_bytes())
        url = serving["url"]
        assert httpx.get(url + "/api/health").status_code == 200
        events = EventLog(url, "/global/event")
        _ask(ui, "say hello")
        ui.wait_for(lambda s: "Hello from the mock." in s, 40, "the streamed answer")
        sessions = httpx.get(url + "/session").json()
        assert_valid(sessions, response_schema("/session", "get", 200))
        assert [s["directory"] for s in sessions] == [str(setup.project)]
        assert _exit(ui, status) == "0"
    finally:
        ui.close()
        if events is not None:
            events.close()
    assert events is not None and not events.invalid, events.invalid[:3]
    assert "message.part.delta" in {p["type"] for p in events.payloads()}
    # the server started for the UI is gone with it: the data dir is free, the port closed
    assert not (data / "serving.json").exists()
    EventStore.check_free(data)
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/api/health")


def test_tui_attaches_to_the_serve_holding_the_data_dir(kittiwake: Kittiwake, tmp_path):
    elsewhere = kittiwake.project / "sub"
    elsewhere.mkdir(exist_ok=True)  # not a git worktree: its configuration is its own
    (elsewhere / "kittiwake.json").write_bytes((kittiwake.project / "kittiwake.json").read_bytes())
    status = tmp_path / "status"
    own = {k: kittiwake.env[k] for k in ("PYTHONPATH", "KITTIWAKE_DATA_DIR")}
    env = _with_opencode({**client_env(tmp_path), **own})
    ui = _tui(tmp_path, elsewhere, env, status)
    try:
        ui.wait_for(lambda s: "Ask anything" in s, 60, "the home screen")
        _ask(ui, "hello from a subdirectory")
        ui.wait_for(lambda s: "Hello from the mock." in s, 40, "the streamed answer")
        assert _exit(ui, status) == "0"
    finally:
        ui.close()
    # the UI worked in its own directory, on the server that keeps running
    assert httpx.get(kittiwake.url + "/api/health").status_code == 200
    found = httpx.get(kittiwake.url + "/session", params={"directory": str(elsewhere)}).json()
    assert_valid(found, response_schema("/session", "get", 200))
    assert [s["directory"] for s in found] == [str(elsewhere)]


def test_tui_without_opencode_names_the_package(provider: Provider, tmp_path):
    setup = Kittiwake(tmp_path, provider)
    path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "opencode").exists()
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "tui"], cwd=setup.project, capture_output=True,
        text=True, timeout=30, env={**setup.env, "PATH": path},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("kittiwake: OpenCode's terminal UI is not installed")
    assert "npm install -g opencode-ai@1.18.33" in done.stderr
    assert not (tmp_path / "data" / "kittiwake.duckdb").exists()  # refused before opening


def test_tui_says_why_its_server_did_not_start(provider: Provider, tmp_path):
    setup = Kittiwake(tmp_path, provider)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "tui", "--port", str(port)], cwd=setup.project,
            capture_output=True, text=True, timeout=60, env=_with_opencode(setup.env),
        )  # fmt: skip
    assert done.returncode == 1
    log = tmp_path / "data" / "log" / "tui-serve.log"
    assert done.stderr.splitlines()[-1] == (
        f"kittiwake: the server did not start: cannot listen on 127.0.0.1:{port}: "
        f"Address already in use (log: {log})"
    )
    assert not (tmp_path / "data" / "serving.json").exists()
