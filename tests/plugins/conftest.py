"""Plugins through real runtimes: a real DuckDB file, the scripted model at the provider
seam, plugins given to ``open_runtime`` or written as files, and a recorder of what each
hook saw."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from actors import Configuration, Runtime
from runtime import Location, open_runtime
from runtime.llm import LLMClient
from runtime.plugins import hookimpl
from tests.config.conftest import ROOT

__all__ = ["Recorder", "make_venv", "plugin_runtime", "session"]


class Recorder:
    """A plugin recording each tool call it sees (``tool_execute_before``/``after``) and
    each permission it is asked about, answering ``None`` (no opinion) to all."""

    name = "recorder"

    def __init__(self) -> None:
        self.before: list[tuple[str, str, Any]] = []
        self.after: list[tuple[str, str, str]] = []
        self.asked: list[tuple[str, str, list[str], str]] = []

    @hookimpl
    async def tool_execute_before(self, call: Any, args: Any) -> None:
        self.before.append((call.tool, call.session_id, args))

    @hookimpl
    async def tool_execute_after(self, call: Any, result: Any) -> None:
        self.after.append((call.tool, call.session_id, type(result).__name__))

    @hookimpl
    def permission_ask(self, permission: Any) -> None:
        self.asked.append(
            (permission.call.tool, permission.permission, permission.resources, permission.status)
        )


@asynccontextmanager
async def plugin_runtime(
    tmp_path: Path, llm: LLMClient, *, config: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[tuple[Runtime, Path]]:
    """A runtime (real DuckDB) and its Location ``tmp_path/work``; with *config*, the
    configuration is read (written to the Location's ``kittiwake.json``; a given
    ``configuration`` is how, else the test's home and nothing else)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    configuration = options.pop("configuration", None)
    if config is not None:
        (work / "kittiwake.json").write_text(json.dumps(config))
        env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
        configuration = configuration or Configuration(env=env)
    async with open_runtime(
        data_dir=tmp_path / "data", llm=llm, configuration=configuration, **options
    ) as rt:
        yield rt, work


async def session(rt: Runtime, work: Path) -> str:
    return (await rt.sessions.create(location=Location(directory=str(work)))).id


def make_venv(folder: Path) -> Path:
    """A virtualenv without pip of its own whose interpreter sees this checkout and the
    test environment's packages (pip among them) through a ``.pth`` file; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "kittiwake-checkout.pth").write_text(
        f"{ROOT}\n{sysconfig.get_path('purelib')}\n"
    )
    return python
