"""The ``instructions`` key: files and globs that become the ``config/instructions`` source."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Final

from runtime.context import UNAVAILABLE, InstructionFile, SystemContext, Unavailable
from runtime.context import render_instructions as _render

__all__ = ["CONFIG_INSTRUCTIONS_KEY", "config_instructions_source", "find_instruction_files"]

CONFIG_INSTRUCTIONS_KEY: Final = "config/instructions"
_UPDATED: Final = "These configured instructions replace the ones loaded before."
_REVOKED: Final = "Previously configured instructions no longer apply."


def find_instruction_files(
    patterns: Sequence[str], *, directory: str, root: str, home: str
) -> list[InstructionFile] | Unavailable:
    """Read the files *patterns* name, in pattern order, each once. Blocking.

    ``~/`` patterns start at *home*, absolute ones stand alone, and relative ones are
    matched in *directory* and each folder above it up to *root* (as OpenCode's upward
    glob). URLs are not fetched. Returns :data:`UNAVAILABLE` when a matched file cannot
    be read.
    """
    paths: list[str] = []
    for pattern in patterns:
        if pattern.startswith(("http://", "https://")):
            continue
        if pattern.startswith("~/"):
            found = sorted(glob.glob(os.path.join(home, pattern[2:]), recursive=True))
        elif os.path.isabs(pattern):
            found = sorted(glob.glob(pattern, recursive=True))
        else:
            found = [p for folder in _upward(directory, root) for p in _matches(folder, pattern)]
        paths.extend(os.path.realpath(p) for p in found if os.path.isfile(p))
    files: list[InstructionFile] = []
    for path in dict.fromkeys(paths):
        try:
            with open(path, encoding="utf-8") as handle:
                files.append(InstructionFile(path=path, content=handle.read()))
        except (OSError, UnicodeDecodeError):
            return UNAVAILABLE
    return files


def _upward(directory: str, root: str) -> list[str]:
    folders = [os.path.realpath(directory)]
    stop = os.path.realpath(root)
    while folders[-1] != stop and os.path.dirname(folders[-1]) != folders[-1]:
        folders.append(os.path.dirname(folders[-1]))
    return folders


def _matches(folder: str, pattern: str) -> list[str]:
    return sorted(glob.glob(os.path.join(glob.escape(folder), pattern), recursive=True))


def config_instructions_source(files: Sequence[InstructionFile] | Unavailable) -> SystemContext:
    """The ``config/instructions`` Context Source for one observation: empty when no file
    is configured (a previously admitted set is then revoked)."""
    if not isinstance(files, Unavailable) and not files:
        return SystemContext.EMPTY
    value: list[InstructionFile] | Unavailable = (
        UNAVAILABLE if isinstance(files, Unavailable) else list(files)
    )
    return SystemContext.loaded(
        CONFIG_INSTRUCTIONS_KEY,
        list[InstructionFile],
        value,
        _render,
        lambda files: f"{_UPDATED}\n\n{_render(files)}",
        lambda _: _REVOKED,
    )
