"""The layering contracts: packages meet only through each other's public names.

``lint-imports`` enforces them (pyproject.toml); these tests prove that it fails when a
violation is planted, and walk every module's imports themselves as a second check that
needs no contract list kept up to date.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "gateway", "runtime", "storage")
# Subpackages of runtime that count as packages of their own. runtime.compaction, .drain,
# .revert and .titles are rooms of runtime's core: they may use its private modules.
RUNTIME_PACKAGES = (
    "runtime.agents",
    "runtime.config",
    "runtime.context",
    "runtime.llm",
    "runtime.mcp",
    "runtime.plugins",
    "runtime.tools",
)
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _package(module: str) -> str:
    for sub in RUNTIME_PACKAGES:
        if module == sub or module.startswith(sub + "."):
            return sub
    return module.split(".")[0]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """Every dotted name *node* may import: the module and, for ``from``, each name in it."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def cross_package_private_imports(
    source: str, module: str, *, is_package: bool = False
) -> list[str]:
    """``line: imported`` for each import in *source* of another package's private module."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for target in _imported(node, module, is_package):
            if target.split(".")[0] not in PACKAGES:
                continue
            owner = _package(target)
            inside = target[len(owner) :].split(".")
            if owner != _package(module) and any(_is_private(part) for part in inside):
                found.append(f"{module}:{node.lineno}: {target}")
                break
    return found


def test_no_package_imports_another_packages_private_module() -> None:
    found = [
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in cross_package_private_imports(
            path.read_text(), _module_name(path), is_package=path.name == "__init__.py"
        )
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("actors.session._turn", "from runtime import _schema as ev"),
        ("gateway.http._app", "from actors.kernel._events import OVERFLOWED"),
        ("actors.api._sessions", "import storage._batch"),
        ("runtime.tools._model", "from runtime._ids import IdGenerator"),
        ("runtime.config._load", "from runtime.context._instructions import RACY_NS"),
        ("runtime._history", "from .llm._errors import LLMError"),
        ("actors.session._session", "from runtime.drain._drain import plan"),
        ("runtime.tools._registry", "from runtime.revert._revert import is_hidden"),
    ],
)
def test_the_walk_sees_a_private_import(module: str, source: str) -> None:
    assert len(cross_package_private_imports(source, module)) == 1


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("actors.session._turn", "from runtime import events as ev"),
        ("actors.session._turn", "from actors.kernel._events import EventHub"),
        ("runtime.llm._client", "from runtime.llm._errors import LLMError"),
        ("runtime._history", "from runtime._lowering import lower_history"),
        ("runtime.tools._model", "from runtime import IdGenerator"),
        ("runtime.revert._revert", "from runtime._schema import SessionInfo"),
        ("runtime.tools.lsp._servers", "from runtime.tools._registry import EditReport"),
    ],
)
def test_the_walk_allows_public_names_and_own_package(module: str, source: str) -> None:
    assert cross_package_private_imports(source, module) == []


def _contracts() -> dict[str, dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}


def test_subpackage_contract_lists_every_private_runtime_module() -> None:
    contract = _contracts()["runtime's subpackages use runtime's public names"]
    modules = sorted(f"runtime.{path.stem}" for path in (ROOT / "runtime").glob("_*.py"))
    assert contract["forbidden_modules"] == [m for m in modules if m != "runtime.__init__"]
    assert contract["source_modules"] == list(RUNTIME_PACKAGES)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the four packages and pyproject.toml, to plant violations in."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_lint_imports_keeps_the_contracts(checkout: Path) -> None:
    result = _lint_imports(checkout)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("path", "line", "broken"),
    [
        ("actors/_planted.py", "from runtime import _schema", "private modules stay inside"),
        ("gateway/_planted.py", "from storage._batch import AdmitPrompt", "private modules stay"),
        ("runtime/agents/_planted.py", "from runtime.tools._model import ToolContext", "private"),
        ("runtime/tools/_planted.py", "from runtime._ids import IdGenerator", "subpackages use"),
        ("runtime/tools/web/_planted.py", "from runtime._schema import Prompt", "subpackages use"),
        ("runtime/_planted.py", "from runtime.revert._revert import is_hidden", "private"),
        ("runtime/revert/_planted.py", "from runtime.drain._drain import plan", "private"),
        ("runtime/tools/_planted.py", "from runtime.tools.lsp._server import converter", "private"),
        (
            "runtime/llm/_planted.py",
            "from runtime import IdGenerator",
            "runtime.llm imports nothing",
        ),
        ("runtime/llm/_planted.py", "from runtime.agents import AgentInfo", "imports nothing"),
        ("runtime/llm/_planted.py", "from runtime.context import SystemContext", "imports nothing"),
        ("actors/kernel/_planted.py", "from actors.session import SessionActor", "actors' rooms"),
        ("actors/store/_planted.py", "from actors.cluster import SessionLease", "actors' rooms"),
        ("actors/cluster/_planted.py", "from actors.session import DurableQuestions", "actors'"),
        ("actors/session/_planted.py", "from actors.api import Sessions", "actors' rooms"),
        ("actors/api/_planted.py", "from actors.session._turn import Turn", "private modules"),
        ("gateway/http/_planted.py", "from gateway.opencode import OpenCodeGateway", "gateway's"),
        ("gateway/opencode/_planted.py", "from gateway.operator import Samples", "gateway's"),
        ("gateway/operator/_planted.py", "from gateway.opencode import FileLimits", "gateway's"),
        ("gateway/cluster/_planted.py", "from gateway.cli import main", "gateway's rooms"),
        ("gateway/opencode/_planted.py", "from gateway.http._app import Gateway", "private"),
        ("gateway/mcp/_planted.py", "from gateway.opencode import OpenCodeGateway", "gateway's"),
        ("gateway/opencode/_planted.py", "from gateway.mcp import mcp_routes", "gateway's rooms"),
        ("gateway/mcp/_planted.py", "from runtime.mcp._server import McpServer", "private"),
        ("runtime/mcp/_planted.py", "from runtime._ids import IdGenerator", "subpackages use"),
        ("runtime/mcp/_planted.py", "from runtime.tools._model import ToolError", "private"),
        ("actors/session/_planted.py", "import mcp.types", "only runtime.mcp imports the mcp"),
        ("gateway/mcp/_planted.py", "from mcp import ClientSession", "only runtime.mcp imports"),
        ("gateway/acp/_planted.py", "from gateway.opencode import OpenCodeGateway", "gateway's"),
        ("gateway/opencode/_planted.py", "from gateway.acp import EmbeddedBackend", "gateway's"),
        ("gateway/acp/_planted.py", "from actors.session import SessionExecution", "ACP's room"),
        ("gateway/acp/_planted.py", "from gateway.http._wire import follow", "private modules"),
        ("runtime/plugins/_planted.py", "from runtime._ids import IdGenerator", "subpackages use"),
        ("runtime/plugins/_planted.py", "from runtime.tools._model import ToolError", "private"),
        ("runtime/plugins/_planted.py", "from actors import Runtime", "layers: gateway"),
        ("actors/session/_planted.py", "import pluggy", "only runtime.plugins imports pluggy"),
        ("gateway/plugins/_planted.py", "from gateway.mcp import mcp_routes", "gateway's rooms"),
        ("gateway/mcp/_planted.py", "from gateway.plugins import plugin_routes", "gateway's"),
        ("gateway/plugins/_planted.py", "from pluggy import PluginManager", "only runtime.plugins"),
        ("runtime/tools/_planted.py", "from pluggy import HookImpl", "only runtime.plugins"),
        ("gateway/web/_planted.py", "from actors import Runtime", "web app is a client of"),
        ("gateway/web/_planted.py", "from runtime import Location", "web app is a client of"),
        ("gateway/web/_planted.py", "from gateway.operator import Samples", "gateway's rooms"),
        ("gateway/web/_planted.py", "from gateway.http._routes import HTML", "private modules"),
        ("gateway/opencode/_planted.py", "from gateway.web import web_routes", "gateway's rooms"),
        ("gateway/github/_planted.py", "from actors import Runtime", "GitHub's room"),
        ("gateway/github/_planted.py", "from gateway.cli import main", "gateway's rooms"),
        ("gateway/acp/_planted.py", "from slack_sdk import WebClient", "only gateway.slack"),
        ("gateway/cli/_planted.py", "import slack_bolt", "only gateway.slack imports"),
        ("gateway/slack/_planted.py", "from actors.session import SessionActor", "Slack bot is"),
        ("gateway/slack/_planted.py", "from gateway.cli import main", "gateway's rooms"),
        ("gateway/acp/_planted.py", "from gateway.slack import SlackBot", "gateway's rooms"),
        ("gateway/http/_planted.py", "from gateway.sdk import sdk_sources", "gateway's rooms"),
        ("gateway/sdk/_planted.py", "from gateway.cli import main", "gateway's rooms"),
    ],
)
def test_lint_imports_fails_on_a_planted_violation(
    checkout: Path, path: str, line: str, broken: str
) -> None:
    (checkout / path).write_text(line + "\n")
    result = _lint_imports(checkout)
    assert result.returncode == 1, result.stdout + result.stderr
    broken_lines = [
        text for text in result.stdout.splitlines() if re.search(r" BROKEN( \(.*\))?$", text)
    ]
    assert len(broken_lines) == 1, result.stdout
    assert broken in broken_lines[0]
    assert path.removesuffix(".py").replace("/", ".") in result.stdout
