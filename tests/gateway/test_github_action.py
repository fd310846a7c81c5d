"""``action.yml``: parsed, and its steps run in order on this machine as a runner would run
them (no runner exists here), with the variables GitHub sets: its shell steps run with bash
as GitHub runs them, its ``uses:`` steps (setup-python, cache, upload-artifact) are checked
for their inputs. The install step pip-installs this repository for real, offline."""

from __future__ import annotations

import json
import os
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

import trio
import yaml

from tests.gateway.test_cli_run import catalog, said
from tests.gateway.test_github_run import (
    KEY,
    REPO,
    TOKEN,
    Checkout,
    calls,
    github,
    issue_comment,
    provider,
)

__all__ = ["github", "provider"]  # the mock GitHub and provider server fixtures

ROOT = Path(__file__).resolve().parents[2]
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_TOKEN = re.compile(r"\s*(\|\||&&|==|!=|!|\(|\)|'(?:[^']|'')*'|[A-Za-z_][\w.-]*(?:\(\))?)")


def evaluate(text: str, contexts: dict[str, Any]) -> Any:
    """A GitHub Actions expression over *contexts*: property paths, '' strings, ==, !=,
    !, &&, || (returning an operand, as GitHub does) and always()/success()."""
    tokens = [t for t in _TOKEN.findall(text)]
    assert "".join(tokens).replace(" ", "") == text.replace(" ", ""), text
    at = 0

    def value(token: str) -> Any:
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        if token in ("always()", "success()"):
            return token == "always()" or contexts["__status"] == "success"
        node: Any = contexts
        for part in token.split("."):
            node = node.get(part, "") if isinstance(node, dict) else ""
        return node

    def unary() -> Any:
        nonlocal at
        token = tokens[at]
        at += 1
        if token == "!":
            return not unary()
        if token == "(":
            inner = either()
            at += 1
            return inner
        return value(token)

    def compare() -> Any:
        nonlocal at
        left = unary()
        while at < len(tokens) and tokens[at] in ("==", "!="):
            op = tokens[at]
            at += 1
            right = unary()
            left = (str(left) == str(right)) == (op == "==")
        return left

    def both() -> Any:
        nonlocal at
        left = compare()
        while at < len(tokens) and tokens[at] == "&&":
            at += 1
            right = compare()
            left = right if left else left
        return left

    def either() -> Any:
        nonlocal at
        left = both()
        while at < len(tokens) and tokens[at] == "||":
            at += 1
            right = both()
            left = left if left else right
        return left

    return either()


def substitute(text: str, contexts: dict[str, Any]) -> str:
    def one(found: re.Match[str]) -> str:
        result = evaluate(found.group(1), contexts)
        return ("true" if result else "false") if isinstance(result, bool) else str(result)

    return _EXPRESSION.sub(one, text)


def outputs(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split("=", 1) for line in lines if "=" in line)


async def test_the_action_runs_its_steps_in_order(tmp_path, provider, github):
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = action["inputs"]
    assert action["runs"]["using"] == "composite"
    assert inputs["model"]["required"] is True
    assert inputs["mentions"]["default"] == "/kittiwake,/kw"
    for name in ("agent", "prompt", "working-directory", "use_github_token", "api-key"):
        assert name in inputs, name

    runner = tmp_path / "runner"
    workspace = runner / "work" / "kite"
    workspace.mkdir(parents=True)
    checkout = Checkout(tmp_path, workspace)
    python = runner / "python"  # what setup-python puts first on PATH
    await trio.run_process([sys.executable, "-m", "venv", "--without-pip", str(python)])
    site = python / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    data = runner / "kittiwake-data"  # the action's data dir, with the local provider's catalog
    data.mkdir()
    (data / "models-dev.json").write_text(json.dumps(catalog(provider.base_url)))
    event = tmp_path / "event.json"
    event.write_text(json.dumps({
        "repository": {"full_name": REPO, "default_branch": "main"},
        **issue_comment("/kw add a greeting"),
    }))  # fmt: skip
    output, summary = runner / "output", runner / "summary.md"
    keep = ("PATH", "LANG", "SSL_CERT_FILE", "PIP_FIND_LINKS")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({
        "PATH": f"{python / 'bin'}:{env['PATH']}", "HOME": str(tmp_path), "CI": "true",
        "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": f"{github.base_url}/api/v3", "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "1",
        "RUNNER_TEMP": str(runner), "RUNNER_OS": "Linux",
        "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",  # offline: the dev env's hatchling
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    })  # fmt: skip
    given = {"model": "local/m1", "api-key": KEY}
    contexts: dict[str, Any] = {
        "inputs": {name: given.get(name, spec.get("default", "")) for name, spec in inputs.items()},
        "github": {"token": TOKEN, "run_id": "42", "run_attempt": "1"},
        "steps": {}, "__status": "success",
    }  # fmt: skip
    provider.queue(
        calls("write", {"filePath": "hello.txt", "content": "hello\n"}),
        calls("shell", {"command": "env", "description": "environment"}),
        said("I added hello.txt."),
    )

    used: list[tuple[str, dict[str, str]]] = []
    for step in action["runs"]["steps"]:
        condition = step.get("if")
        if condition is not None:
            if not evaluate(_EXPRESSION.sub(r"\1", condition), contexts):
                continue
        elif contexts["__status"] != "success":
            continue
        if "uses" in step:
            given_with = {k: substitute(str(v), contexts) for k, v in step.get("with", {}).items()}
            used.append((step["uses"], given_with))
            continue
        assert step["shell"] == "bash"
        step_env = {
            **env,
            **{k: substitute(str(v), contexts) for k, v in step.get("env", {}).items()},
        }
        cwd = workspace / substitute(step.get("working-directory", "."), contexts)
        output.write_text("")
        script = tmp_path / "step.sh"
        script.write_text(step["run"])
        with trio.fail_after(300):
            done = await trio.run_process(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=cwd, env=step_env, check=False, capture_stdout=True, capture_stderr=True,
            )  # fmt: skip
        assert done.returncode == 0, (step["name"], done.stderr.decode()[-3000:])
        if "id" in step:
            contexts["steps"][step["id"]] = {"outputs": outputs(output)}

    paths = contexts["steps"]["kittiwake"]["outputs"]
    assert [name for name, _ in used] == [
        "actions/setup-python@v5", "actions/cache@v4", "actions/upload-artifact@v4",
    ]  # fmt: skip
    assert used[0][1] == {"python-version": "3.11"}
    assert used[1][1]["path"] == paths["pip-cache"] and Path(paths["pip-cache"]).is_absolute()
    assert used[1][1]["key"].startswith("kittiwake-pip-Linux-3.11-")
    assert used[2][1] == {
        "name": "kittiwake-session-42-1", "path": str(runner / "kittiwake-session"),
        "if-no-files-found": "ignore",
    }  # fmt: skip
    assert (python / "bin" / "kittiwake").exists()  # installed by pip from the repository

    assert [call for call, _ in github.calls] == ["GET", "POST", "POST", "POST"]
    branch = github.posted("/pulls")[0]["head"]
    assert checkout.show(branch, "hello.txt") == "hello\n"
    assert "I added hello.txt." in github.posted("/issues/5/comments")[0]["body"]
    assert "- `hello.txt`" in summary.read_text()
    assert provider.requests[0].headers["authorization"] == f"Bearer {KEY}"
    artifact = sorted(p.name for p in (runner / "kittiwake-session").iterdir())
    assert len(artifact) == 2 and artifact[0].endswith(".json") and artifact[1].endswith(".md")
    shell = [m for m in provider.requests[2].json()["messages"] if m["role"] == "tool"][-1]
    assert "GITHUB_EVENT_NAME=issue_comment" in str(shell["content"])
    for folder in (runner / "kittiwake-session", data):
        for path in folder.rglob("*"):
            if path.is_file() and path.name != "auth.json":  # the credential store holds the key
                assert TOKEN.encode() not in path.read_bytes(), path
                assert KEY.encode() not in path.read_bytes(), path
    assert TOKEN not in json.dumps(provider.requests[2].json())
    assert KEY not in json.dumps(provider.requests[2].json())
