"""Which model ``kittiwake`` uses, in real subprocesses over the fixture catalog."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path("/work/shared/fixtures/models-dev-sample.json")


async def _kittiwake(tmp_path: Path, *args: str, **env: str) -> trio.CompletedProcess[bytes]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    shutil.copy(SAMPLE, data / "models-dev.json")  # a fresh cache: the fixture is the catalog
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "KITTIWAKE_DATA_DIR": str(data),
        "KITTIWAKE_SERVER_PASSWORD": "",
        **env,
    }
    with trio.fail_after(30):
        return await trio.run_process(
            [sys.executable, "-m", "gateway", *args],
            stdin=b"", capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT,
            env=environ,
        )  # fmt: skip


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
