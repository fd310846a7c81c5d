"""OpenCode's pinned clients against a team server (``kittiwake serve --tokens``): the SDK
with a bearer token, ``opencode run --attach`` with the password, and a read token that
the SDK cannot prompt with."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.gateway.conftest import assert_valid, component, response_schema

from .harness import CLIENTS, ROOT, Kittiwake, Provider, client_env, opencode

PASSWORD = "team-pw"
SDK = CLIENTS / "@opencode-ai" / "sdk" / "dist" / "index.js"
SCRIPT = ROOT / "tests" / "opencode" / "sdk_script.mjs"


@pytest.fixture(scope="module")
def team(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kittiwake]:
    served = Kittiwake(tmp_path_factory.mktemp("team"), provider, password=PASSWORD).start()
    yield served
    served.stop()


def _token(team: Kittiwake, role: str) -> str:
    body = {"user": f"sdk-{role}", "project": "*", "role": role}
    made = httpx.post(team.url + "/api/token", json=body, auth=team.auth, timeout=30)
    assert made.status_code == 201, made.text
    return str(made.json()["data"]["token"])


def _sdk(team: Kittiwake, token: str, tmp_path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", str(SCRIPT), team.url, str(SDK), token], capture_output=True, text=True,
        timeout=90, env=client_env(tmp_path),  # a hang guard
    )  # fmt: skip


def test_the_sdk_works_with_a_write_token(team: Kittiwake, tmp_path):
    assert httpx.get(team.url + "/session").status_code == 401
    token = _token(team, "write")
    # Its first request verifies the hash (tens of ms): done here, so that the SDK's event
    # stream, which connects lazily beside its first calls, is not the slower one.
    warm = httpx.get(team.url + "/session", headers={"Authorization": f"Bearer {token}"})
    assert warm.status_code == 200
    done = _sdk(team, token, tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert_valid(seen["session"], component("Session"))
    assert_valid(seen["reply"], response_schema("/session/{sessionID}/message", "post", 200))
    assert seen["reply"]["parts"][1]["text"] == "Hello from the mock."
    mine = [e for e in seen["events"] if e["properties"].get("sessionID") == seen["session"]["id"]]
    statuses = [e["properties"]["status"]["type"] for e in mine if e["type"] == "session.status"]
    assert statuses[-1:] == ["idle"]  # the stream, with the token, saw the turn end


def test_a_read_token_cannot_prompt_through_the_sdk(team: Kittiwake, tmp_path):
    done = _sdk(team, _token(team, "read"), tmp_path)
    assert done.returncode != 0
    assert "ForbiddenError" in done.stderr or "403" in done.stderr or done.stdout == ""


def test_run_attach_with_the_password(team: Kittiwake, tmp_path):
    env = {**client_env(tmp_path), "OPENCODE_SERVER_PASSWORD": PASSWORD}
    done = opencode("run", "--attach", team.url, "hi from run", env=env, cwd=team.project)
    assert done.returncode == 0, done.stderr
    # What it printed can race its exit (see test_run_and_sdk.py); the answer is durable.
    sessions = httpx.get(team.url + "/session", auth=team.auth, timeout=30).json()
    texts = []
    for session in sessions:
        url = f"{team.url}/session/{session['id']}/message"
        for message in httpx.get(url, auth=team.auth, timeout=30).json():
            texts += [p.get("text") for p in message["parts"] if p["type"] == "text"]
    assert any("hi from run" in t for t in texts) and "Hello from the mock." in texts


def _texts(team: Kittiwake) -> list[str]:
    texts = []
    for session in httpx.get(team.url + "/session", auth=team.auth, timeout=30).json():
        url = f"{team.url}/session/{session['id']}/message"
        for message in httpx.get(url, auth=team.auth, timeout=30).json():
            texts += [p.get("text") for p in message["parts"] if p["type"] == "text"]
    return texts


def test_run_attach_with_a_token_as_its_password(team: Kittiwake, tmp_path):
    """OpenCode's clients speak only basic auth: a token given as the password is that token,
    with its role (the user name is OpenCode's own, ignored)."""
    write, read = _token(team, "write"), _token(team, "read")
    env = {**client_env(tmp_path), "OPENCODE_SERVER_PASSWORD": write}
    done = opencode("run", "--attach", team.url, "hi with a token", env=env, cwd=team.project)
    assert done.returncode == 0, done.stderr
    assert any("hi with a token" in t for t in _texts(team))

    env = {**client_env(tmp_path), "OPENCODE_SERVER_PASSWORD": read}
    opencode("run", "--attach", team.url, "hi read only", env=env, cwd=team.project)
    assert not any("hi read only" in t for t in _texts(team))  # a read token cannot prompt
    basic = httpx.post(team.url + "/session", json={}, auth=("opencode", read), timeout=30)
    assert basic.status_code == 403, basic.text
    assert basic.json()["_tag"] == "ForbiddenError"
    wrong = httpx.get(team.url + "/session", auth=("opencode", write[:-2] + "xx"), timeout=30)
    assert wrong.status_code == 401
