"""Which model ``kittiwake`` uses, in real subprocesses over the fixture catalog."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import trio

from tests.waiting import serving_url

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path("/work/shared/fixtures/models-dev-sample.json")


def _environ(tmp_path: Path, **env: str) -> dict[str, str]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    shutil.copy(SAMPLE, data / "models-dev.json")  # a fresh cache: the fixture is the catalog
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "KITTIWAKE_DATA_DIR": str(data),
        "KITTIWAKE_SERVER_PASSWORD": "",
        **env,
    }


async def _kittiwake(
    tmp_path: Path, *args: str, cwd: Path = ROOT, **env: str
) -> trio.CompletedProcess[bytes]:
    with trio.fail_after(30):
        return await trio.run_process(
            [sys.executable, "-m", "gateway", *args],
            stdin=b"", capture_stdout=True, capture_stderr=True, check=False, cwd=cwd,
            env=_environ(tmp_path, **env),
        )  # fmt: skip


def _mock_project(tmp_path: Path, model: str) -> Path:
    """A project whose kittiwake.json configures provider ``mock`` (one model, ``mock-model``,
    no credentials needed) and *model* as its model; the file's path."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    mock = {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": "http://127.0.0.1:9/v1"},
        "models": {"mock-model": {"name": "Mock", "tool_call": True}},
    }
    path = project / "kittiwake.json"
    path.write_text(json.dumps({"model": model, "provider": {"mock": mock}}))
    return path


async def test_a_wrong_model_is_named_by_run_and_serve(tmp_path):
    for args in (("run", "hello"), ("serve", "--port", "0")):
        done = await _kittiwake(
            tmp_path, *args, OPENAI_API_KEY="sk-test", KITTIWAKE_MODEL="openai/gpt-9"
        )
        err = done.stderr.decode()
        assert done.returncode == 2, err
        assert "kittiwake: unknown model 'openai/gpt-9'; known models of provider openai: " in err
        assert "gpt-5.5" in err
        assert "no LLM provider" not in err.lower()
        assert "Traceback" not in err
    assert not list((tmp_path / "data").glob("*.duckdb"))  # refused before opening the store


async def test_a_model_of_a_provider_without_credentials_is_refused(tmp_path):
    done = await _kittiwake(tmp_path, "run", "hello", KITTIWAKE_MODEL="anthropic/claude-sonnet-5")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "needs credentials for provider anthropic: set ANTHROPIC_API_KEY" in err


async def test_a_wrong_configured_model_refuses_to_start_naming_the_file(tmp_path):
    config = _mock_project(tmp_path, "mock/nope-model")
    for args in (("run", "hello"), ("serve", "--port", "0")):
        done = await _kittiwake(tmp_path, *args, cwd=config.parent)
        assert done.returncode == 2, done.stderr.decode()
        assert done.stderr.decode().splitlines() == [
            f"kittiwake: {config}: model: unknown model 'mock/nope-model'; "
            "known models of provider mock: mock-model"
        ], args
    assert not list((tmp_path / "data").glob("*.duckdb"))  # refused before opening the store


async def test_a_configured_model_changed_to_a_wrong_name_fails_prompts_listing_models(tmp_path):
    config = _mock_project(tmp_path, "mock/mock-model")
    server = await trio.lowlevel.open_process(
        [sys.executable, "-m", "gateway", "serve", "--port", "0"], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=config.parent,
        env=_environ(tmp_path),
    )  # fmt: skip
    try:
        url = await serving_url(server)
        config.write_text(config.read_text().replace("mock/mock-model", "mock/nope-model"))
        done = await _kittiwake(tmp_path, "run", "--attach", url, "hello", cwd=config.parent)
        assert done.returncode == 1, done.stderr.decode()
        assert (
            "kittiwake: step failed: unknown model 'mock/nope-model'; "
            "known models of provider mock: mock-model\n"
        ) in done.stderr.decode()
    finally:
        server.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            await server.wait()
    shown = await _kittiwake(tmp_path, "config", cwd=config.parent)
    assert shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout.decode().splitlines()[-2:] == [
        "diagnostics:",
        f"  {config}: model: unknown model 'mock/nope-model'; "
        "known models of provider mock: mock-model",
    ]
