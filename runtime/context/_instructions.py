"""The ``core/instructions`` source: global and upward project ``AGENTS.md`` files.

Discovery canonicalizes the working directory and project root and never walks
outside the root; a file that resolves outside the root is not discovered.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

import msgspec
import trio

from runtime.context._system import UNAVAILABLE, SystemContext, Unavailable

__all__ = [
    "DISABLE_PROJECT_CONFIG_ENV",
    "INSTRUCTIONS_FILENAME",
    "INSTRUCTIONS_KEY",
    "InstructionFile",
    "discover_instructions",
    "instructions_producer",
    "instructions_source",
    "load_instructions",
    "render_instructions",
]

INSTRUCTIONS_KEY: Final = "core/instructions"
INSTRUCTIONS_FILENAME: Final = "AGENTS.md"
DISABLE_PROJECT_CONFIG_ENV: Final = "KITTIWAKE_DISABLE_PROJECT_CONFIG"
_SUPERSEDES: Final = "These instructions replace all previously loaded ambient instructions."
_REVOKED: Final = "Previously loaded instructions no longer apply."


class InstructionFile(msgspec.Struct, frozen=True, kw_only=True):
    """One instruction file: canonical path and UTF-8 content."""

    path: str
    content: str


def render_instructions(files: Sequence[InstructionFile]) -> str:
    """Every file as ``Instructions from: <path>\\n<content>``, in order."""
    return "\n\n".join(f"Instructions from: {file.path}\n{file.content}" for file in files)


def _instructions_update(files: list[InstructionFile]) -> str:
    return f"{_SUPERSEDES}\n\n{render_instructions(files)}"


def _instructions_removed(files: list[InstructionFile]) -> str:
    return _REVOKED


def instructions_source(files: Sequence[InstructionFile] | Unavailable) -> SystemContext:
    """The ``core/instructions`` source for one observation.

    An empty list is a confirmed absence: the source is left out, so a previously
    admitted set is revoked. :data:`UNAVAILABLE` keeps the admitted set.
    """
    if isinstance(files, Unavailable):
        value: list[InstructionFile] | Unavailable = UNAVAILABLE
    elif not files:
        return SystemContext.EMPTY
    else:
        value = list(files)
    return SystemContext.loaded(
        INSTRUCTIONS_KEY,
        list[InstructionFile],
        value,
        render_instructions,
        _instructions_update,
        _instructions_removed,
    )


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in ("1", "true")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep)


def _canonical_file(path: str, directory_is_canonical: bool) -> str | None:
    """Canonical path of an existing ``path``, or ``None`` when nothing is there."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if directory_is_canonical and not stat.S_ISLNK(mode):
        return path
    resolved = os.path.realpath(path)
    return resolved if os.path.exists(resolved) else None


def _upward(start: str, stop: str) -> list[str]:
    found: list[str] = []
    directory = start
    while True:
        candidate = _canonical_file(os.path.join(directory, INSTRUCTIONS_FILENAME), True)
        if candidate is not None and _within(candidate, stop):
            found.append(candidate)
        parent = os.path.dirname(directory)
        if directory == stop or parent == directory:
            return found
        directory = parent


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def discover_instructions(
    *,
    directory: str | os.PathLike[str],
    project_root: str | os.PathLike[str],
    config_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str],
) -> list[InstructionFile] | Unavailable:
    """Read the global then upward project ``AGENTS.md`` files, nearest first. Blocking.

    The upward scan is skipped when ``env`` sets ``KITTIWAKE_DISABLE_PROJECT_CONFIG``
    (``1``/``true``) or when ``directory`` lies outside ``project_root``.

    Returns:
      The files in order, or :data:`UNAVAILABLE` when a discovered file can't be read.
    """
    paths: list[str] = []
    if config_dir is not None:
        found = _canonical_file(os.path.join(os.fspath(config_dir), INSTRUCTIONS_FILENAME), False)
        paths += [] if found is None else [found]
    start, stop = os.path.realpath(directory), os.path.realpath(project_root)
    if not _flag(env, DISABLE_PROJECT_CONFIG_ENV) and _within(start, stop):
        paths += [path for path in _upward(start, stop) if path not in paths]
    files: list[InstructionFile] = []
    for path in paths:
        content = _read(path)
        if content is None:
            return UNAVAILABLE
        files.append(InstructionFile(path=path, content=content))
    return files


async def load_instructions(
    *,
    directory: str | os.PathLike[str],
    project_root: str | os.PathLike[str],
    config_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str],
) -> list[InstructionFile] | Unavailable:
    """Run :func:`discover_instructions` in a worker thread.

    On cancellation the call waits for the (short, local) filesystem walk to end,
    then raises ``trio.Cancelled``.
    """
    return await trio.to_thread.run_sync(
        lambda: discover_instructions(
            directory=directory, project_root=project_root, config_dir=config_dir, env=env
        )
    )


def instructions_producer(
    *,
    directory: str | os.PathLike[str],
    project_root: str | os.PathLike[str],
    config_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str],
) -> Callable[[], Awaitable[SystemContext]]:
    """A registry producer observing ``core/instructions`` at each load."""

    async def produce() -> SystemContext:
        files = await load_instructions(
            directory=directory, project_root=project_root, config_dir=config_dir, env=env
        )
        return instructions_source(files)

    return produce
