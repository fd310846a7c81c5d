"""``kittiwake plugin list`` and ``kittiwake plugin add``."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import trio

from gateway._datadir import CliError
from runtime.config import global_config_file, project_config_file, write_config_patch

if TYPE_CHECKING:
    from actors import Runtime

__all__ = ["PluginCheck", "install_plugin", "print_plugins"]


def print_plugins(plugins: list[dict[str, Any]], out: TextIO) -> int:
    """Print each plugin of ``GET /plugin``: its name, state, where it came from, its hooks
    and its last error; exit status 1 when a required one failed."""
    if not plugins:
        print("no plugins (see docs/plugins.md)", file=out)
        return 0
    width = max(len(p["name"]) for p in plugins)
    for plugin in plugins:
        state = plugin["state"] + (" (required)" if plugin["required"] else "")
        print(
            f"{plugin['name']:<{width}}  {state:<16} {plugin['source']}: {plugin['origin']}",
            file=out,
        )
        if plugin["hooks"]:
            print(f"{'':<{width}}  hooks: {', '.join(plugin['hooks'])}", file=out)
        if plugin["error"]:
            count = f" ({plugin['errors']} errors)" if plugin["errors"] > 1 else ""
            print(f"{'':<{width}}  last error{count}: {plugin['error']}", file=out)
    failed = any(p["required"] and p["state"] == "failed" for p in plugins)
    return 1 if failed else 0


async def install_plugin(
    requirement: str, *, directory: str, global_config: bool, seconds: float, out: TextIO
) -> int:
    """``pip install`` *requirement* into Kittiwake's own environment (the interpreter running
    this command), then add the distribution it installed to the ``plugin`` list of the
    project's configuration file (of the global one with *global_config*).

    pip's own output goes to standard error. Raises ``CliError`` when pip fails, or does not
    finish within *seconds* (it is killed then); nothing is recorded in either case.
    """
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--report", "-", requirement]
    with trio.move_on_after(seconds) as waiting:
        done = await trio.run_process(
            command, capture_stdout=True, stderr=sys.stderr.fileno(), check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    if waiting.cancelled_caught:
        raise CliError(f"pip install {requirement} did not finish within {seconds:g} s")
    if done.returncode != 0:
        raise CliError(f"pip install {requirement} failed (exit {done.returncode})")
    report = json.loads(done.stdout)
    installed = [item["metadata"]["name"] for item in report.get("install", [])]
    name = _requested(report) or (installed[0] if installed else None) or _known(requirement)
    if name is None:
        print(f"kittiwake: {requirement} was installed already; name it in plugin", file=out)
        return 0
    env = dict(os.environ)
    path = global_config_file(env) if global_config else project_config_file(directory)
    await trio.to_thread.run_sync(lambda: write_config_patch(path, {"plugin": [name]}))
    print(f"kittiwake: installed {name}; added to plugin in {path}", file=out)
    return 0


def _known(requirement: str) -> str | None:
    """The installed distribution *requirement* names, if it is a plain name."""
    try:
        return str(importlib.metadata.distribution(requirement).metadata["Name"])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _requested(report: dict[str, Any]) -> str | None:
    """The distribution the user asked for (pip marks it ``requested``), if it installed."""
    for item in report.get("install", []):
        if item.get("requested"):
            return str(item["metadata"]["name"])
    return None


class PluginCheck:
    """Loads the plugins of the served directory's Location beside the server's start;
    serving is announced only once they are loaded, and not at all when a required one
    failed (the one line says which and why)."""

    def __init__(self, rt: Runtime, directory: Path) -> None:
        self._rt, self._directory = rt, str(directory)
        self._done = trio.Event()
        self._failed: list[str] = []

    async def run(self) -> None:
        try:
            location = await self._rt.execution.location(self._directory)
            await location.plugins.wait_settled()
            self._failed = [f"{s.name}: {s.error}" for s in location.plugins.failed_required()]
        finally:
            self._done.set()

    async def ready(self, server: Any) -> None:
        await self._done.wait()
        if self._failed:
            server.stop()
            raise CliError(f"required plugin failed, not serving: {'; '.join(self._failed)}")
