"""The served route table's document, and the generated modules formatted and written."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from gateway._gateway import create_app
from gateway.http import gateway_of, openapi_document
from gateway.sdk._generate import sdk_sources
from runtime import open_runtime
from runtime.llm import ScriptedLLM

__all__ = ["SDK_PACKAGE", "format_sources", "route_document", "write_sdk"]

SDK_PACKAGE: Final = Path(__file__).resolve().parents[2] / "sdk" / "python" / "kittiwake_sdk"
"""Where the SDK's package lives in a checkout."""
_FORMAT_TIMEOUT: Final = 60.0


async def route_document() -> dict[str, Any]:
    """The OpenAPI document of the gateway as ``kittiwake serve`` builds it (every room
    installed), from a runtime opened on a temporary data dir that is removed after.

    Raises what opening the runtime raises; cancellation closes it."""
    with tempfile.TemporaryDirectory(prefix="kittiwake-sdk-") as tmp:
        async with open_runtime(data_dir=Path(tmp) / "data", llm=ScriptedLLM([])) as rt:
            return openapi_document(gateway_of(create_app(rt, directory=Path(tmp))).routes)


def format_sources(sources: dict[str, str]) -> dict[str, str]:
    """*sources* formatted by ruff (the project's pinned formatter and its settings), so that
    generated code passes ``ruff format --check`` and regenerating is byte-stable.

    Raises ``subprocess.CalledProcessError`` when ruff rejects a source (a generator bug) and
    ``subprocess.TimeoutExpired`` after a minute."""
    ruff = Path(sys.executable).with_name("ruff")
    root = SDK_PACKAGE.parents[2]
    out = {}
    for name, text in sorted(sources.items()):
        done = subprocess.run(
            [str(ruff), "format", "--stdin-filename", str(SDK_PACKAGE / name), "-"],
            input=text, capture_output=True, text=True, check=True, cwd=root,
            timeout=_FORMAT_TIMEOUT,
        )  # fmt: skip
        out[name] = done.stdout
    return out


async def write_sdk(package: Path = SDK_PACKAGE) -> list[str]:
    """Regenerate the SDK's generated modules in *package*; the names of those that changed."""
    sources = format_sources(sdk_sources(await route_document()))
    changed = []
    for name, text in sources.items():
        path = package / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(name)
    return changed
