"""``kittiwake plugin add`` and ``kittiwake plugin list`` as real subprocesses; ``add``
installs into a real, temporary virtualenv (not the test's), whose interpreter runs
Kittiwake from this checkout through a ``.pth`` file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import trio

from tests.config.conftest import base_env
from tests.plugins.conftest import make_venv
from tests.plugins.test_example import EXAMPLE
from tests.plugins.test_served import REQUIRED_FILE

GOOD_FILE = """
from runtime.plugins import hookimpl

@hookimpl
def shell_env(info):
    return {"GOOD": "1"}
"""


async def kittiwake(
    python: Path | str, *args: str, cwd: Path, env: dict[str, str], stdin: bytes = b""
) -> trio.CompletedProcess[bytes]:
    with trio.fail_after(300):
        return await trio.run_process(
            [str(python), "-m", "gateway", *args], cwd=str(cwd), env=env, stdin=stdin,
            capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip


async def test_plugin_add_installs_records_and_list_shows_it(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in base_env(tmp_path).items() if k != "PYTHONPATH"}
    added = await kittiwake(python, "plugin", "add", str(EXAMPLE), cwd=project, env=env)
    assert added.returncode == 0, added.stderr.decode()
    config = json.loads((project / "kittiwake.json").read_text())
    assert config == {"plugin": ["kittiwake-example-plugin"]}
    installed = list((tmp_path / "venv").rglob("kittiwake_example_plugin/__init__.py"))
    assert len(installed) == 1  # in the virtualenv, not the test's environment
    assert importlib.util.find_spec("kittiwake_example_plugin") is None
    assert b"installed kittiwake-example-plugin; added to plugin in" in added.stderr
    again = await kittiwake(python, "plugin", "add", str(EXAMPLE), cwd=project, env=env)
    assert again.returncode == 0, again.stderr.decode()
    assert json.loads((project / "kittiwake.json").read_text()) == config  # recorded once
    listed = await kittiwake(python, "plugin", "list", cwd=project, env=env)
    assert listed.returncode == 0, listed.stderr.decode()
    lines = listed.stdout.decode().splitlines()
    assert lines[0].split()[:3] == ["example", "ready", "entrypoint:"]
    assert lines[1].split() == [
        "hooks:",
        "context_source,",
        "permission_ask,",
        "shell_env,",
        "tool",
    ]


async def test_plugin_list_shows_failures_and_exits_1_for_a_required_one(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".kittiwake" / "plugins").mkdir(parents=True)
    (project / ".kittiwake" / "plugins" / "good.py").write_text(GOOD_FILE)
    (project / ".kittiwake" / "plugins" / "licence.py").write_text(REQUIRED_FILE)
    listed = await kittiwake(sys.executable, "plugin", "list", cwd=project, env=base_env(tmp_path))
    assert listed.returncode == 1, listed.stderr.decode()
    good, hooks, licence, error = listed.stdout.decode().splitlines()
    assert good.split()[:2] == ["good", "ready"] and hooks.split() == ["hooks:", "shell_env"]
    assert licence.split()[:3] == ["licence", "failed", "(required)"]
    assert error.split(":", 1)[1].strip() == ("load: RuntimeError: cannot reach the licence server")
