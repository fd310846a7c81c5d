"""The example plugin package, installed as a user would: ``pip install`` into a temporary
virtualenv (its wheel built by pip, its entry point in its ``.dist-info``), whose
interpreter runs a real ``kittiwake serve`` driven over HTTP, in front of a local server
speaking OpenAI's chat-completions wire format."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.config.conftest import (
    ROOT,
    base_env,
    chat_text,
    chat_tool_call,
    local_provider,
    new_session,
    prompt,
    provider,
    serving,
)
from tests.llm.conftest import LocalServer
from tests.plugins.conftest import make_venv

EXAMPLE = ROOT / "examples" / "kittiwake-example-plugin"
__all__ = ["provider"]  # the local chat-completions server, a fixture of tests/config


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary virtualenv's interpreter, with the example plugin installed into it by pip
    (which builds its wheel with its build backend and installs its entry points)."""
    venv = tmp_path_factory.mktemp("venv")
    python = make_venv(venv)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(EXAMPLE)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [module] = venv.rglob("kittiwake_example_plugin/__init__.py")
    assert module.is_relative_to(venv)
    return python


def sent(request: Any) -> str:
    """What one provider request carried, as text (its messages, system parts included)."""
    return json.dumps(request.json()["messages"])


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.json()["messages"] if m["role"] == "tool"]


async def test_the_installed_example_plugin_drives_a_real_session(
    tmp_path: Path, installed: Path, provider: LocalServer
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "notes.txt").write_text("one\ntwo\nthree\n")
    (project / "TEAM_NOTES.md").write_text("Deploys are frozen until Friday.\n")
    config = {
        "model": "local/echo-1", "provider": local_provider(provider.port, "echo-1"),
        "plugin": [["kittiwake-example-plugin", {"allowed": "src/"}]],
    }  # fmt: skip
    (project / "kittiwake.json").write_text(json.dumps(config))
    env = {k: v for k, v in base_env(tmp_path).items() if k != "PYTHONPATH"}
    provider.queue(
        chat_tool_call("count_lines", {"path": "notes.txt"}), chat_text("three lines"),
        chat_tool_call("write", {"filePath": "outside.txt", "content": "x"}), chat_text("denied"),
        chat_tool_call("write", {"filePath": "src/inside.txt", "content": "y"}), chat_text("ok"),
        chat_tool_call("shell", {"command": "echo $KITTIWAKE_EXAMPLE $EXAMPLE_CWD", "description": "env"}),
        chat_text("ran"),
    )  # fmt: skip
    served_by = serving(env, project, str(installed))
    async with served_by as served, httpx.AsyncClient(base_url=served.url) as client:
        plugins = (await client.get("/plugin")).json()
        sid = await new_session(client, project)
        await prompt(client, sid, "count the lines of notes.txt")
        (project / "TEAM_NOTES.md").write_text("Deploys are open again.\n")
        await prompt(client, sid, "write outside.txt")
        await prompt(client, sid, "write src/inside.txt")
        await prompt(client, sid, "show the environment")
    [example] = plugins
    # found as an installed entry point and named by the configuration: loaded once
    assert (example["name"], example["source"], example["state"]) == (
        "example",
        "entrypoint",
        "ready",
    )
    assert example["hooks"] == ["context_source", "permission_ask", "shell_env", "tool"]
    requests = provider.requests
    first = requests[0].json()
    assert "count_lines" in [t["function"]["name"] for t in first["tools"]]
    assert "The team's notes for this project:\\nDeploys are frozen until Friday." in sent(
        requests[0]
    )
    [counted] = tool_results(requests[1])
    assert json.loads(counted)["structured"] == {"path": "notes.txt", "lines": 3, "agent": "build"}
    update = "The team's notes for this project changed; they now read:\\nDeploys are open again."
    assert update not in sent(requests[1]) and update in sent(requests[2])
    assert first["messages"][0] == requests[2].json()["messages"][0]  # the baseline stands
    [denied] = tool_results(requests[3])[-1:]
    assert "Permission denied" in denied and not (project / "outside.txt").exists()
    assert (project / "src" / "inside.txt").read_text() == "y"
    assert json.loads(tool_results(requests[7])[-1])["output"].startswith("1 .\n")
