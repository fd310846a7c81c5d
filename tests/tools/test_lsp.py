"""Language servers for real: python-lsp-server (pyflakes diagnostics, jedi navigation)."""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from runtime.agents import BUILD
from runtime.llm import TextPart
from runtime.tools import (
    LanguageServers,
    LspLimits,
    ServerSpec,
    ToolContext,
    ToolEnvironment,
    ToolFailure,
    ToolSuccess,
    builtin_server_specs,
    location_registry,
    lsp_tool,
    server_specs,
)

PYLSP = ServerSpec(name="pylsp", command=[sys.executable, "-m", "pylsp"], extensions=[".py"])
LIMITS = LspLimits(idle_timeout=60.0, diagnostics_timeout=10.0, restart_backoff=0.1)


def _ctx(root: Path) -> ToolContext:
    return ToolContext(
        session_id="ses_1", agent="build", assistant_message_id="msg_1", tool_call_id="call_1",
        directory=str(root),
    )  # fmt: skip


@asynccontextmanager
async def _location(root: Path, limits: LspLimits = LIMITS):
    env = ToolEnvironment(directory=str(root), data_dir=str(root.parent / "data"))
    servers = LanguageServers(str(root), lambda: [PYLSP], lambda: limits)
    registry = location_registry(env)
    registry.edit_observer = servers
    registry.contribute(lsp_tool(servers))
    async with trio.open_nursery() as nursery:
        await nursery.start(servers.run)
        try:
            yield registry, servers
        finally:
            nursery.cancel_scope.cancel()


def _text(result) -> str:
    assert isinstance(result, ToolSuccess), result
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


async def _until(server, predicate, seconds: float = 20.0) -> None:
    with trio.fail_after(seconds):
        while not predicate():
            await server.changed.wait()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "birds.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    (root / "main.py").write_text("from birds import greet\n\nprint(greet('kittiwake'))\n")
    return root


async def test_an_edit_introducing_an_error_returns_its_diagnostic(project):
    async with _location(project) as (registry, servers):
        clean = await registry.settle(
            "edit", {"filePath": "main.py", "oldString": "'kittiwake'", "newString": "'gull'"},
            _ctx(project), agent=BUILD,
        )  # fmt: skip
        broken = await registry.settle(
            "edit", {"filePath": "main.py", "oldString": "greet('gull')", "newString": "gret('gull')"},
            _ctx(project), agent=BUILD,
        )  # fmt: skip
        patched = await registry.settle(
            "apply_patch",
            {"patchText": "*** Begin Patch\n*** Add File: broken.py\n+def f(:\n+    pass\n"
                           "*** End Patch"},
            _ctx(project), agent=BUILD,
        )  # fmt: skip
    assert _text(clean) == "Edited main.py: 1 replacement(s)"
    assert "diagnostics" not in clean.structured
    [error] = broken.structured["diagnostics"]["main.py"]  # as LSP's Diagnostic
    assert error["range"]["start"] == {"line": 2, "character": 6}
    assert (error["message"], error["severity"], error["source"]) == (
        "undefined name 'gret'",
        1,
        "pyflakes",
    )
    text = _text(broken)
    assert text.startswith("Edited main.py: 1 replacement(s)\n\nLSP errors detected")
    assert '<diagnostics file="main.py">' in text
    assert "ERROR [3:7] undefined name 'gret' (pyflakes)" in text
    assert '<diagnostics file="broken.py">' in _text(patched)
    assert "ERROR [1:8] invalid syntax (pyflakes)" in _text(patched)


async def test_lsp_definition_hover_symbols_and_references(project):
    async with _location(project) as (registry, servers):

        async def lsp(**args):
            return await registry.settle("lsp", args, _ctx(project), agent=BUILD)

        definition = await lsp(operation="goToDefinition", filePath="main.py", line=3, character=7)
        references = await lsp(operation="findReferences", filePath="birds.py", line=1, character=5)
        hover = await lsp(operation="hover", filePath="main.py", line=3, character=7)
        symbols = await lsp(operation="documentSymbol", filePath="birds.py")
        diagnostics = await lsp(operation="diagnostics", filePath="main.py")
        unknown = await lsp(operation="hover", filePath="notes.txt")
    assert _text(definition) == "birds.py:1:5"
    assert set(_text(references).splitlines()) >= {"birds.py:1:5", "main.py:1:19", "main.py:3:7"}
    assert "greet(name)" in _text(hover)
    assert _text(symbols).startswith("Function greet (line 1)")
    assert _text(diagnostics) == "No diagnostics."
    assert isinstance(unknown, ToolFailure)
    assert unknown.error == "No language server is configured or installed for .txt files"


async def test_a_killed_server_is_restarted(project):
    async with _location(project) as (registry, servers):
        first = await registry.settle(
            "lsp", {"operation": "documentSymbol", "filePath": "birds.py"}, _ctx(project),
            agent=BUILD,
        )  # fmt: skip
        server = servers.servers["pylsp"]
        old = server.pid
        assert server.status == "connected" and old is not None
        server.kill()
        await _until(server, lambda: server.restarts == 1 and server.status == "connected")
        assert server.pid != old
        again = await registry.settle(
            "lsp", {"operation": "goToDefinition", "filePath": "main.py", "line": 3,
                    "character": 7}, _ctx(project), agent=BUILD,
        )  # fmt: skip
    assert "Function greet" in _text(first)
    assert _text(again) == "birds.py:1:5"
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)  # closing the Location killed it


async def test_an_idle_server_is_shut_down_and_starts_again_on_use(project):
    async with _location(project, LspLimits(idle_timeout=0.3)) as (registry, servers):
        await registry.settle(
            "lsp", {"operation": "documentSymbol", "filePath": "birds.py"}, _ctx(project),
            agent=BUILD,
        )  # fmt: skip
        server = servers.servers["pylsp"]
        pid = server.pid
        assert servers.statuses() == [
            {"id": "pylsp", "name": "pylsp", "root": str(project), "status": "connected"}
        ]
        await _until(server, lambda: server.status == "stopped" and not server.running)
        assert servers.statuses() == []
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        result = await registry.settle(
            "lsp", {"operation": "documentSymbol", "filePath": "birds.py"}, _ctx(project),
            agent=BUILD,
        )  # fmt: skip
        assert "Function greet" in _text(result)
        assert server.starts == 2 and server.restarts == 0


async def test_a_missing_command_reports_error_without_failing_the_edit(project):
    missing = ServerSpec(name="nowhere", command=["/nonexistent/lsp"], extensions=[".py"])
    env = ToolEnvironment(directory=str(project), data_dir=str(project.parent / "data"))
    servers = LanguageServers(str(project), lambda: [missing], lambda: LIMITS)
    registry = location_registry(env)
    registry.edit_observer = servers
    async with trio.open_nursery() as nursery:
        await nursery.start(servers.run)
        result = await registry.settle(
            "write", {"filePath": "x.py", "content": "y = z\n"}, _ctx(project), agent=BUILD
        )
        nursery.cancel_scope.cancel()
    assert _text(result) == "Created x.py (6 bytes)"
    assert servers.statuses() == [
        {"id": "nowhere", "name": "nowhere", "root": str(project), "status": "error"}
    ]


def test_the_builtin_servers_are_found_beside_the_interpreter(monkeypatch):
    """``.venv/bin/kittiwake`` run with the virtualenv's bin not on PATH (``make run``) finds
    the pylsp installed there (``kittiwake[lsp]``), and runs it by that path."""
    own = Path(sys.executable).parent
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != own)
    monkeypatch.setenv("PATH", path)
    [pylsp] = [s for s in builtin_server_specs() if s.name == "pylsp"]
    assert pylsp.command == [str(own / "pylsp")]
    assert pylsp.extensions == [".py", ".pyi"]


def test_server_specs_follow_configuration_and_path(tmp_path):
    from runtime.config import Config

    found = {"pylsp": "/bin/pylsp", "gopls": "/bin/gopls"}
    assert [s.name for s in builtin_server_specs(found.get)] == ["pylsp", "gopls"]
    assert server_specs(False, found.get) == []
    assert [s.name for s in server_specs(None, found.get)] == ["pylsp", "gopls"]
    config = Config(**{"lsp": {"gopls": {"disabled": True}}})  # type: ignore[arg-type]
    import msgspec

    config = msgspec.convert(
        {
            "lsp": {
                "gopls": {"disabled": True},
                "mine": {"command": ["my-ls"], "extensions": [".x"]},
            }
        },
        Config,
    )
    specs = server_specs(config.lsp, found.get)
    assert [(s.name, s.command) for s in specs] == [("mine", ["my-ls"]), ("pylsp", ["/bin/pylsp"])]
