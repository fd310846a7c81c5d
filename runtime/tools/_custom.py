"""Custom tools of a Location: ``.kittiwake/tool/*.py`` modules defining ``Tool`` objects.

Each module is imported under a name unique to its file, and every module-level
``Tool`` (or list of them named ``tools``) is collected. Importing runs the
module's code with the runtime's authority: only trusted projects should be
loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from types import ModuleType
from typing import Any, Final

import msgspec

from runtime.tools._tool import Tool

__all__ = ["CustomTools", "import_file", "load_custom_tools"]

TOOL_DIR: Final = os.path.join(".kittiwake", "tool")
_log = logging.getLogger("runtime.tools.custom")


class CustomTools(msgspec.Struct, frozen=True, kw_only=True):
    """Tools found, in file order, and one diagnostic per file that failed to load."""

    tools: list[Any]
    diagnostics: list[str] = []


def load_custom_tools(directory: str) -> CustomTools:
    """Import every ``<directory>/.kittiwake/tool/*.py`` and collect its tools.

    Blocking. A module that fails to import, or defines no tool, is skipped
    with a diagnostic (also logged); a later file's tool of the same name wins.
    """
    found: dict[str, Tool[Any]] = {}
    diagnostics: list[str] = []
    for path in _tool_files(directory):
        try:
            tools = _tools_of(import_file(path))
        except Exception as exc:  # any import-time error of user code
            diagnostics.append(f"{path}: {type(exc).__name__}: {exc}")
            _log.warning("custom tool not loaded", extra={"path": path, "error": repr(exc)})
            continue
        if not tools:
            diagnostics.append(f"{path}: defines no Tool")
        found.update((t.name, t) for t in tools)
    return CustomTools(tools=list(found.values()), diagnostics=diagnostics)


def _tool_files(directory: str) -> list[str]:
    folder = os.path.join(directory, TOOL_DIR)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if n.endswith(".py")]


def import_file(path: str, prefix: str = "kittiwake_custom_tool") -> ModuleType:
    """Import the Python file at *path* as a module named for it (``<prefix>_<digest of
    the absolute path>_<stem>``, replacing an earlier import of the same file). Blocking;
    raises what the module's code raises (and nothing is left in ``sys.modules``)."""
    digest = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]
    stem = os.path.splitext(os.path.basename(path))[0]
    name = f"{prefix}_{digest}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _tools_of(module: ModuleType) -> list[Tool[Any]]:
    values = list(vars(module).values())
    listed = getattr(module, "tools", [])
    if isinstance(listed, list | tuple):
        values.extend(listed)
    unique = {id(v): v for v in values if isinstance(v, Tool)}
    return list(unique.values())
