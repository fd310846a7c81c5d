"""``opencode serve`` started offline against a local chat-completions mock, for the
benchmarks that compare Kittiwake with it (``bench/tui.py``, ``bench/cluster.py``).

Needs ``make opencode`` (the pinned clients in ``clients/node_modules``)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.opencode.harness import OPENCODE, client_env, free_port

__all__ = ["OFFLINE", "OpenCodeServe"]

OFFLINE = {
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "npm_config_registry": "http://127.0.0.1:9/",
}  # fmt: skip
"""On top of ``client_env``'s (no autoupdate, no models.dev fetch, no sharing). ``opencode
serve`` installs ``@opencode-ai/plugin`` into its configuration directory in the background
(npm, whatever the flags); an unreachable registry makes that fail at once (a warning in its
log) instead of downloading while prompts are measured."""


class OpenCodeServe:
    """``opencode serve --pure`` in a project configured for a local mock provider (provider
    ``local``, *models* on ``http://127.0.0.1:{provider_port}/v1``; the first is the default)."""

    def __init__(self, tmp: Path, provider_port: int, models: tuple[str, ...] = ("m1",)) -> None:
        self.project = tmp / "project"
        self.project.mkdir(parents=True)
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "model": f"local/{models[0]}", "share": "disabled", "autoupdate": False,
            "provider": {"local": {
                "npm": "@ai-sdk/openai-compatible", "name": "Local",
                "options": {"baseURL": f"http://127.0.0.1:{provider_port}/v1"},
                "models": {m: {"name": "Mock One" if m == "m1" else m, "tool_call": True,
                               "limit": {"context": 8000, "output": 1000}} for m in models},
            }},
        }  # fmt: skip
        (self.project / "opencode.json").write_text(json.dumps(config))
        self.env = {**client_env(tmp), **OFFLINE}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "opencode-serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180.0) -> OpenCodeServe:
        command = [str(OPENCODE), "serve", "--pure", "--port", str(self.port), "--print-logs"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.project, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("opencode serve exited:\n" + self.log.read_text())
            try:
                if httpx.get(self.url + "/global/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("opencode serve did not start:\n" + self.log.read_text())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
