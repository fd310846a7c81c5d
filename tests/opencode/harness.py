"""OpenCode's own clients against a real ``kittiwake serve``: the pinned clients installed by
``make opencode`` (clients/node_modules), a chat-completions provider on 127.0.0.1 (the
tests' ``LocalServer`` on a thread of its own, answering by the request's content), a
served project, and the terminal UI under tmux.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trio

from tests.llm.conftest import LocalServer, Recorded, Reply
from tests.llm.streams import sse

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients" / "node_modules"
OPENCODE = CLIENTS / ".bin" / "opencode"
MODEL = "m1"
PROVIDER = "local"


def require_clients() -> None:
    """Fail with the fix when the pinned clients are not installed."""
    if not OPENCODE.exists() or not (CLIENTS / "@opencode-ai" / "sdk").is_dir():
        raise RuntimeError("OpenCode's clients are not installed: run `make opencode`")
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is not installed")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1750000000,
        "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }  # fmt: skip


def said(*pieces: str, delay: float = 0.0) -> Reply:
    """An answer streaming *pieces* one chunk each (*delay* seconds apart)."""
    chunks = [sse(_chunk({"role": "assistant", "content": pieces[0]}))]
    chunks += [sse(_chunk({"content": p})) for p in pieces[1:]]
    chunks.append(sse(_chunk({}, finish="stop"), done=True))
    return Reply(chunks=chunks, delay=delay)


def calls(tool: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    """An answer calling *tool* once."""
    call = {
        "index": 0, "id": call_id, "type": "function",
        "function": {"name": tool, "arguments": json.dumps(arguments)},
    }  # fmt: skip
    return Reply(chunks=[sse(_chunk({"tool_calls": [call]}), _chunk({}, finish="tool_calls"))])


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content)
    return ""


def respond(request: Recorded) -> Reply:
    """The provider's script, by the request's content.

    A title request gets a title; after a tool result, "Tool done."; otherwise the last
    user text decides: ``slow`` streams for a minute, ``read FILE`` / ``write FILE`` /
    ``edit FILE`` / ``run CMD`` call read / write / edit (``os.getcwd()`` becomes
    ``sys.argv``) / shell, anything else is greeted.
    """
    body = request.json()
    system = json.dumps(body.get("messages", [])[:1])
    if "You name conversations" in system:
        return said("Mock title")
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return said("Tool ", "done.")
    text = last_user_text(body)
    words = text.split()
    if "slow" in words:
        return said(*["Slowly "] + ["and slowly "] * 300, delay=0.2)
    for verb in ("read", "write", "edit", "run"):
        if verb in words and words.index(verb) + 1 < len(words):
            target = " ".join(words[words.index(verb) + 1 :])
            if verb == "read":
                return calls("read", {"filePath": target})
            if verb == "write":
                return calls("write", {"filePath": target, "content": "written by the mock\n"})
            if verb == "edit":
                edit = {"filePath": target, "oldString": "os.getcwd()", "newString": "sys.argv"}
                return calls("edit", edit)
            return calls("shell", {"command": target, "description": "runs " + target})
    return said("Hello ", "from ", "the mock.")


class Provider:
    """A ``LocalServer`` answering with ``respond`` on a thread with its own trio loop."""

    def __init__(self, responder: Callable[[Recorded], Reply] = respond) -> None:
        self.server = LocalServer()
        self.server.responder = responder
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                listeners = await nursery.start(
                    functools.partial(trio.serve_tcp, self.server.handle, 0, host="127.0.0.1")
                )
                self.server.port = listeners[0].socket.getsockname()[1]
                self._ready.set()

    def start(self) -> Provider:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the mock provider did not start")
        return self

    def stop(self) -> None:
        if self._token is not None and self._scope is not None:
            trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(10)

    @property
    def port(self) -> int:
        return self.server.port


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


VENV_BIN = Path(sys.executable).parent


def without_venv(path: str) -> str:
    """*path* (a ``PATH`` value) without the virtualenv's ``bin``, as ``make run`` leaves it."""
    return os.pathsep.join(p for p in path.split(os.pathsep) if Path(p) != VENV_BIN)


class Kittiwake:
    """``kittiwake serve`` in a project directory configured for the mock provider.

    ``as_make_run``: started as ``make run`` starts it, the virtualenv's ``bin/kittiwake``
    with that ``bin`` not on ``PATH`` (else ``python -m gateway serve``). ``mcp``: the
    project's MCP servers (its ``mcp`` key).
    """

    def __init__(
        self, tmp: Path, provider: Provider, *, permission: dict[str, Any] | None = None,
        as_make_run: bool = False, mcp: dict[str, Any] | None = None,
        password: str | None = None,
    ) -> None:  # fmt: skip
        self.tmp = tmp
        self.project = tmp / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "model": f"{PROVIDER}/{MODEL}",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible", "name": "Local",
                    "options": {"baseURL": f"http://127.0.0.1:{provider.port}/v1"},
                    "models": {MODEL: {"name": "Mock One", "tool_call": True,
                                       "limit": {"context": 8000, "output": 1000}}},
                }
            },
        }  # fmt: skip
        if permission is not None:
            config["permission"] = permission
        if mcp is not None:
            config["mcp"] = mcp
        (self.project / "kittiwake.json").write_text(json.dumps(config))
        self.env = client_env(tmp)
        self.env["KITTIWAKE_DATA_DIR"] = str(tmp / "data")
        self.as_make_run = as_make_run
        self.auth = ("kittiwake", password) if password else None
        """With a password, a team server (``serve --tokens``) whose admin it is."""
        if password:
            self.env["KITTIWAKE_SERVER_PASSWORD"] = password
        if as_make_run:
            self.env["PATH"] = without_venv(self.env["PATH"])
        else:
            self.env["PYTHONPATH"] = str(ROOT)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tmp / "serve.log"

    def start(self) -> Kittiwake:
        program = (
            [str(VENV_BIN / "kittiwake")] if self.as_make_run else [sys.executable, "-m", "gateway"]
        )
        command = [*program, "serve", "--port", str(self.port)]
        command += ["--tokens"] if self.auth else []
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.project, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("kittiwake serve exited:\n" + self.log.read_text())
            try:
                health = httpx.get(self.url + "/api/health", timeout=1, auth=self.auth)
                if health.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("kittiwake serve did not start:\n" + self.log.read_text())

    def kill(self) -> None:
        """SIGKILL, waited for."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def client_env(tmp: Path) -> dict[str, str]:
    """An environment of the test's own: home and XDG folders, no update checks."""
    home = tmp / "home"
    for name in ("home", "xdg-config", "xdg-data", "xdg-state", "xdg-cache"):
        (tmp / name).mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), "TERM": "xterm-256color",
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"), "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "XDG_STATE_HOME": str(tmp / "xdg-state"), "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1", "NO_COLOR": "1",
    }  # fmt: skip


class Tmux:
    """One tmux server (its own socket) running one window: send keys, read the screen."""

    def __init__(self, tmp: Path, command: list[str], env: dict[str, str], *,
                 width: int = 120, height: int = 40) -> None:  # fmt: skip
        self.socket = str(tmp / "tmux.sock")
        self.env = env
        self._run("new-session", "-d", "-s", "ui", "-x", str(width), "-y", str(height),
                  "env", *[f"{k}={v}" for k, v in env.items()], *command)  # fmt: skip

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=10,
            env={"PATH": os.environ["PATH"], "HOME": self.env["HOME"], "TERM": "xterm-256color"},
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {done.stderr}")
        return done.stdout

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "ui")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self._run("send-keys", "-t", "ui", *(["-l"] if literal else []), *keys)

    def type(self, text: str) -> None:
        self.keys(text, literal=True)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 20.0,
                 what: str = "") -> str:  # fmt: skip
        """The screen once *predicate* holds; raise with the screen after *timeout*."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            try:
                screen = self.screen()
            except RuntimeError:
                screen = ""
            if predicate(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"screen never showed {what or predicate}:\n{screen}")

    def alive(self) -> bool:
        try:
            self._run("has-session", "-t", "ui")
        except RuntimeError:
            return False
        return True

    def close(self) -> None:
        try:
            self._run("kill-server")
        except RuntimeError:
            pass


def opencode(*args: str, env: dict[str, str], cwd: Path, timeout: float = 90.0,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run the pinned ``opencode`` CLI to its end. *timeout* only guards against a hang:
    a run takes a few seconds on a quiet machine, over 20 at a load of 12."""
    return subprocess.run(
        [str(OPENCODE), *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=timeout, input=stdin if stdin is not None else "",
    )  # fmt: skip
