"""The ``core/instructions`` source: global and upward project ``AGENTS.md`` files.

Discovery canonicalizes the working directory and project root and never walks
outside the root; a file that resolves outside the root is not discovered.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

import msgspec
import trio

from runtime.context._system import UNAVAILABLE, SystemContext, Unavailable

__all__ = [
    "DISABLE_PROJECT_CONFIG_ENV",
    "RACY_NS",
    "INSTRUCTIONS_FILENAME",
    "INSTRUCTIONS_KEY",
    "InstructionFile",
    "InstructionsWatch",
    "discover_instructions",
    "instructions_producer",
    "instructions_source",
    "load_instructions",
    "path_stamp",
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


def _upward(start: str, stop: str, looked_at: list[str]) -> list[str]:
    found: list[str] = []
    directory = start
    while True:
        looked_at.append(os.path.join(directory, INSTRUCTIONS_FILENAME))
        candidate = _canonical_file(looked_at[-1], True)
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
    return _discover(directory, project_root, config_dir, env, [])


def _discover(
    directory: str | os.PathLike[str],
    project_root: str | os.PathLike[str],
    config_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    looked_at: list[str],
) -> list[InstructionFile] | Unavailable:
    """:func:`discover_instructions`, also noting in *looked_at* every path it checked."""
    paths: list[str] = []
    if config_dir is not None:
        looked_at.append(os.path.join(os.fspath(config_dir), INSTRUCTIONS_FILENAME))
        found = _canonical_file(looked_at[-1], False)
        paths += [] if found is None else [found]
    start, stop = os.path.realpath(directory), os.path.realpath(project_root)
    if not _flag(env, DISABLE_PROJECT_CONFIG_ENV) and _within(start, stop):
        paths += [path for path in _upward(start, stop, looked_at) if path not in paths]
    files: list[InstructionFile] = []
    for path in paths:
        content = _read(path)
        if content is None:
            return UNAVAILABLE
        files.append(InstructionFile(path=path, content=content))
    return files


_Stamp = tuple[int, int, int, int, int]


def path_stamp(path: str) -> tuple[_Stamp | None, _Stamp | None]:
    """What identifies *path*'s current state: its own inode, and its target's if a link."""
    try:
        own = os.lstat(path)
    except OSError:
        return None, None
    if not stat.S_ISLNK(own.st_mode):
        return _key(own), None
    try:
        return _key(own), _key(os.stat(path))
    except OSError:
        return _key(own), None


def _key(st: os.stat_result) -> _Stamp:
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


RACY_NS: Final = 100_000_000
"""Files changed this close (ns) before an observation are re-read at the next one:
a file's times come from a coarse kernel clock, so an edit within the same tick as
the previous one can leave size and times unchanged."""


class InstructionsWatch:
    """:func:`load_instructions` that skips the worker thread while nothing changed.

    After each full discovery it remembers the ``lstat`` (and, for links, ``stat``)
    of every path discovery looked at, present or not. The next load compares those
    few stamps on the calling thread (microseconds on a local disk) and reuses the
    files when all match and every file was last changed more than :data:`RACY_NS`
    before the discovery started; otherwise it discovers again in a worker thread.
    Creating, deleting, editing, replacing, re-linking or chmod-ing a watched file
    all change a stamp. Cancellation behaves as :func:`load_instructions`.
    """

    __slots__ = ("_args", "_files", "_stamps", "discoveries")

    def __init__(
        self,
        *,
        directory: str | os.PathLike[str],
        project_root: str | os.PathLike[str],
        config_dir: str | os.PathLike[str] | None,
        env: Mapping[str, str],
    ) -> None:
        self._args = (directory, project_root, config_dir, env)
        self._files: list[InstructionFile] | Unavailable | None = None
        self._stamps: list[tuple[str, tuple[_Stamp | None, _Stamp | None]]] | None = None
        self.discoveries = 0

    async def load(self) -> list[InstructionFile] | Unavailable:
        """The instruction files as they are now. A cancellation point; it yields to the
        scheduler only when the files are read again (in a worker thread)."""
        if self._files is not None and self._stamps is not None:
            if all(path_stamp(path) == stamp for path, stamp in self._stamps):
                await trio.lowlevel.checkpoint_if_cancelled()
                return self._files
        files, stamps = await trio.to_thread.run_sync(self._discover)
        self._files, self._stamps = files, stamps
        self.discoveries += 1
        return files

    def _discover(
        self,
    ) -> tuple[
        list[InstructionFile] | Unavailable,
        list[tuple[str, tuple[_Stamp | None, _Stamp | None]]] | None,
    ]:
        started = time.time_ns()
        looked_at: list[str] = []
        files = _discover(*self._args, looked_at)
        stamps = [(path, path_stamp(path)) for path in looked_at]
        settled = started - RACY_NS
        for own, target in (stamp for _, stamp in stamps):
            for key in (own, target):
                if key is not None and max(key[3], key[4]) >= settled:
                    return files, None  # changed too recently to trust: look again next time
        return files, stamps


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
    """A registry producer observing ``core/instructions`` at each load (through an
    :class:`InstructionsWatch`, so an unchanged tree costs a few ``lstat`` calls)."""
    watch = InstructionsWatch(
        directory=directory, project_root=project_root, config_dir=config_dir, env=env
    )

    async def produce() -> SystemContext:
        return instructions_source(await watch.load())

    return produce
