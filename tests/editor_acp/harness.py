"""``kittiwake acp`` in a real subprocess, driven by the ACP Python SDK's client
(``agent-client-protocol``), with a chat-completions provider on 127.0.0.1.

The SDK is asyncio-only, so each scenario is an asyncio program run by a plain (not trio)
test while the mock provider serves from a thread with its own trio loop
(``tests.opencode.harness.Provider``). The SDK's ``ClientSideConnection`` talks to the
agent over the child's own pipes; the agent's standard output passes through a tee that
checks every line is one JSON-RPC message and validates it against ACP's published JSON
schema (``schema/v1/schema.unstable.json`` of the npm ``@agentclientprotocol/sdk``, whose
unions are open to extensions), and every message the agent sends is checked again, by
method, against the JSON schema of the Python SDK's schema models with every object closed
to fields the schema does not name.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from acp import schema as S
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from pydantic import TypeAdapter

from tests.opencode.harness import Provider

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = 400_000
"""The mock model's context window: large enough that no test's turns compact."""
READ_LIMIT = 64 * 1024 * 1024
WAIT = 30.0

RESPONSES: dict[str, type[Any]] = {
    "initialize": S.InitializeResponse,
    "authenticate": S.AuthenticateResponse,
    "session/new": S.NewSessionResponse,
    "session/load": S.LoadSessionResponse,
    "session/list": S.ListSessionsResponse,
    "session/fork": S.ForkSessionResponse,
    "session/resume": S.ResumeSessionResponse,
    "session/close": S.CloseSessionResponse,
    "session/set_mode": S.SetSessionModeResponse,
    "session/set_config_option": S.SetSessionConfigOptionResponse,
    "session/prompt": S.PromptResponse,
}
CLIENT_REQUESTS: dict[str, type[Any]] = {
    "session/request_permission": S.RequestPermissionRequest,
    "fs/read_text_file": S.ReadTextFileRequest,
    "fs/write_text_file": S.WriteTextFileRequest,
    "terminal/create": S.CreateTerminalRequest,
    "terminal/output": S.TerminalOutputRequest,
    "terminal/release": S.ReleaseTerminalRequest,
    "terminal/wait_for_exit": S.WaitForTerminalExitRequest,
    "terminal/kill": S.KillTerminalRequest,
    "elicitation/create": S.CreateFormElicitationRequest,
}
NOTIFICATIONS: dict[str, type[Any]] = {"session/update": S.SessionNotification}


PUBLISHED = ROOT / "clients/node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json"
"""ACP's published JSON schema as the npm package ships it (version 1 with its unstable
methods, such as ``session/fork``), installed by ``make opencode``."""


@functools.cache
def published() -> jsonschema.Draft202012Validator:
    """The published schema's branch for what an agent sends (requests, responses and
    notifications)."""
    if not PUBLISHED.exists():
        raise RuntimeError("ACP's npm SDK is not installed: run `make opencode`")
    schema = json.loads(PUBLISHED.read_text())
    return jsonschema.Draft202012Validator({**schema["anyOf"][0], "$defs": schema["$defs"]})


def _closed(node: Any) -> None:
    """Close every object schema with properties to fields it names (in place)."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)


@functools.cache
def validator(model: Any) -> jsonschema.Draft202012Validator:
    """A validator of *model* (a schema model, or a union of them) closed by ``_closed``."""
    if hasattr(model, "model_json_schema"):
        schema = model.model_json_schema(by_alias=True)
    else:
        schema = TypeAdapter(model).json_schema(by_alias=True)
    _closed(schema)
    return jsonschema.Draft202012Validator(schema)


class Checker:
    """Checks each message the agent sends against the schema; keeps what it found."""

    def __init__(self) -> None:
        self.asked: dict[Any, str] = {}
        self.problems: list[str] = []
        self.checked = 0
        self.methods: list[str] = []

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction is StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                self.asked[message["id"]] = message["method"]
            return
        self.check(message)

    def check_line(self, message: dict[str, Any]) -> None:
        """Check one line of the agent's output, whole, against the published schema."""
        for error in published().iter_errors(message):
            self.problems.append(f"published schema: {error.message}: {json.dumps(message)[:500]}")

    def check(self, message: dict[str, Any]) -> None:
        self.checked += 1
        try:  # (the tee checks the envelope's "jsonrpc": the SDK's message leaves it out)
            if "method" in message:
                method = message["method"]
                self.methods.append(method)
                kinds = CLIENT_REQUESTS if "id" in message else NOTIFICATIONS
                validator(kinds[method]).validate(message.get("params"))
            elif "error" in message:
                error = {"id": message.get("id"), "error": message["error"]}
                validator(S.AgentErrorMessage).validate(error)
            else:
                method = self.asked[message["id"]]
                validator(RESPONSES[method]).validate(message["result"])
        except (jsonschema.ValidationError, KeyError) as exc:
            self.problems.append(f"{exc}: {json.dumps(message)[:2000]}")


def _disk(path: str) -> str:
    return Path(path).read_text()


def _log_file(setup: Setup) -> Any:
    return open(setup.tmp / "acp.err", "ab")  # noqa: SIM115 - the caller closes it


@dataclass
class Terminal:
    process: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    reader: asyncio.Task[None] | None = None


class Editor:
    """The client side: records every update, answers permission requests with the next
    of ``answers`` while there are some, else ``permission`` (an option id, or None for
    cancelled), answers elicitation forms with the next of ``elicited`` (else declines),
    recording each form in ``forms``, serves files from ``buffers`` (else the disk) and runs terminals as real
    processes."""

    def __init__(self, permission: str | None = "once") -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission = permission
        self.answers: list[str | None] = []
        self.forms: list[tuple[str, Any]] = []
        self.elicited: list[Any] = []
        self.permissions: list[tuple[str, Any, list[Any]]] = []
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []
        self.terminals: dict[str, Terminal] = {}
        self.terminal_calls: list[str] = []
        self.changed = asyncio.Event()
        self.hold_permission: asyncio.Event | None = None
        self.holds: list[asyncio.Event] = []
        """The n-th permission request is answered once ``holds[n]`` is set (if there)."""

    def _touch(self) -> None:
        self.changed.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait until *predicate* holds, checked at each message the agent sends."""
        async with asyncio.timeout(WAIT):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for s, u in self.updates if session_id in (None, s)]

    def text(self, kind: str = "agent_message_chunk", session_id: str | None = None) -> str:
        return "".join(
            u.content.text
            for s, u in self.updates
            if u.session_update == kind and session_id in (None, s) and u.content.type == "text"
        )

    def of(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]

    # -- acp.Client -------------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._touch()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> S.RequestPermissionResponse:
        self.permissions.append((session_id, tool_call, options))
        self._touch()
        if self.hold_permission is not None:
            await self.hold_permission.wait()
        if len(self.permissions) <= len(self.holds):
            await self.holds[len(self.permissions) - 1].wait()
        choice = self.answers.pop(0) if self.answers else self.permission
        if choice is None:
            return S.RequestPermissionResponse(outcome=S.DeniedOutcome(outcome="cancelled"))
        selected = S.AllowedOutcome(outcome="selected", option_id=choice)
        return S.RequestPermissionResponse(outcome=selected)

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode))
        self._touch()
        return (
            self.elicited.pop(0)
            if self.elicited
            else S.DeclineElicitationResponse(action="decline")
        )

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
        **kwargs: Any,
    ) -> S.ReadTextFileResponse:  # fmt: skip
        self.reads.append(path)
        self._touch()
        text = self.buffers[path] if path in self.buffers else _disk(path)
        return S.ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> S.WriteTextFileResponse:
        self.buffers[path] = content
        self._touch()
        return S.WriteTextFileResponse()

    async def create_terminal(
        self, session_id: str, command: str, args: list[str] | None = None, env: Any = None,
        cwd: str | None = None, output_byte_limit: int | None = None, **kwargs: Any,
    ) -> S.CreateTerminalResponse:  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        terminal = Terminal(process=process)

        async def read() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(4096):
                terminal.output += chunk

        terminal.reader = asyncio.create_task(read())
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = terminal
        self.terminal_calls.append(f"create {command} {' '.join(args or [])} in {cwd}")
        self._touch()
        return S.CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> S.WaitForTerminalExitResponse:
        terminal = self.terminals[terminal_id]
        self.terminal_calls.append(f"wait {terminal_id}")
        code = await terminal.process.wait()
        return S.WaitForTerminalExitResponse(exit_code=code if code >= 0 else None)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> S.TerminalOutputResponse:
        terminal = self.terminals[terminal_id]
        if terminal.reader is not None and terminal.process.returncode is not None:
            await terminal.reader
        code = terminal.process.returncode
        status = S.TerminalExitStatus(exit_code=code) if code is not None and code >= 0 else None
        self.terminal_calls.append(f"output {terminal_id}")
        return S.TerminalOutputResponse(
            output=terminal.output.decode(), truncated=False, exit_status=status
        )

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> S.KillTerminalResponse:
        terminal = self.terminals[terminal_id]
        if terminal.process.returncode is None:
            terminal.process.kill()
            await terminal.process.wait()
        self.terminal_calls.append(f"kill {terminal_id}")
        return S.KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> S.ReleaseTerminalResponse:
        terminal = self.terminals[terminal_id]
        if terminal.process.returncode is None:
            terminal.process.kill()
            await terminal.process.wait()
        self.terminal_calls.append(f"release {terminal_id}")
        self._touch()
        return S.ReleaseTerminalResponse()

    def on_connect(self, conn: Any) -> None:
        pass


def catalog(port: int) -> dict[str, Any]:
    """A models.dev catalog with one provider, ``local``, at the mock's port."""
    models = {
        "m1": {
            "id": "m1",
            "name": "Local One",
            "tool_call": True,
            "limit": {"context": CONTEXT},
            "attachment": True,
            "modalities": {"input": ["text", "image"], "output": ["text"]},
        },
        "m2": {"id": "m2", "name": "Local Two", "tool_call": True, "limit": {"context": 1000}},
    }
    return {
        "local": {
            "id": "local", "name": "Local", "npm": "@ai-sdk/openai-compatible",
            "api": f"http://127.0.0.1:{port}", "env": ["LOCAL_API_KEY"], "models": models,
        }
    }  # fmt: skip


class Setup:
    """A data dir whose model catalog has the mock provider, and a project directory."""

    def __init__(self, tmp: Path, provider: Provider) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        self.data.mkdir(exist_ok=True)
        (self.data / "models-dev.json").write_text(json.dumps(catalog(provider.port)))
        self.env = {**os.environ, "HOME": str(tmp), "KITTIWAKE_DATA_DIR": str(self.data)}
        for name in ("KITTIWAKE_SERVER_PASSWORD", "KITTIWAKE_MODEL", "KITTIWAKE_LOG"):
            self.env.pop(name, None)
        self.env["LOCAL_API_KEY"] = "sk-local"
        self.env["KITTIWAKE_MODEL"] = "local/m1"

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "gateway", "acp", *args]


@dataclass
class Agent:
    """One ``kittiwake acp`` process and the SDK's connection to it."""

    conn: ClientSideConnection
    process: asyncio.subprocess.Process
    checker: Checker
    raw: list[bytes]
    stray: list[bytes]


@contextlib.asynccontextmanager
async def agent(
    setup: Setup, editor: Editor, *args: str, checker: Checker | None = None,
    unstable: bool = False,
) -> AsyncIterator[Agent]:  # fmt: skip
    """Start ``kittiwake acp`` in the project directory and connect the SDK's client to it
    (*unstable*: with ACP's unstable methods, such as ``elicitation/create``); on exit close
    its input and wait for it (killed if it does not end in 30 s)."""
    checker = checker or Checker()
    err = _log_file(setup)
    process = await asyncio.create_subprocess_exec(
        *setup.argv(*args), cwd=setup.project, env=setup.env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=err, limit=READ_LIMIT,
    )  # fmt: skip
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    raw: list[bytes] = []
    stray: list[bytes] = []

    async def tee() -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            raw.append(line)
            try:
                message = json.loads(line)
                if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                    stray.append(line)
                else:
                    checker.check_line(message)
            except ValueError:
                stray.append(line)
            reader.feed_data(line)
        reader.feed_eof()

    pump = asyncio.create_task(tee())
    assert process.stdin is not None
    conn = ClientSideConnection(
        editor, process.stdin, reader, observers=[checker.observe],
        use_unstable_protocol=unstable,
    )  # fmt: skip
    try:
        yield Agent(conn=conn, process=process, checker=checker, raw=raw, stray=stray)
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
        if process.returncode is None and process.stdin is not None:
            process.stdin.close()
        try:
            async with asyncio.timeout(WAIT):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
        await pump
        err.close()


def stderr_of(setup: Setup) -> str:
    path = setup.tmp / "acp.err"
    return path.read_text() if path.exists() else ""
