"""Managed Tool Output Files: ``<data dir>/tool-output/tool_<id>``, flat, temporary.

Files are created exclusively (``O_EXCL``) under globally unique ascending ids,
so two settlements can never share or overwrite one. They expire after the
retention period (7 days by default, by mtime); cleanup removes only ``tool_*``
files, never anything else placed in the directory.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Final

import trio

__all__ = [
    "DEFAULT_CLEANUP_EVERY",
    "DEFAULT_RETENTION",
    "cleanup_tool_output",
    "run_tool_output_cleanup",
    "write_managed_output",
]

DEFAULT_RETENTION: Final = 7 * 24 * 3600.0
DEFAULT_CLEANUP_EVERY: Final = 3600.0
_PREFIX: Final = "tool_"
_log = logging.getLogger("runtime.tools.managed")


def write_managed_output(directory: str, file_id: str, text: str) -> str:
    """Write *text* to ``<directory>/<file_id>`` exclusively and return the absolute path.

    Blocking. Raises ``OSError`` (``FileExistsError`` for a reused id) and
    removes a partially written file.
    """
    if not file_id.startswith(_PREFIX) or "/" in file_id:
        raise ValueError(f"Not a managed tool output id: {file_id!r}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(os.path.abspath(directory), file_id)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode())
    except BaseException:
        _unlink_quietly(path)
        raise
    return path


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def cleanup_tool_output(
    directory: str, *, retention: float = DEFAULT_RETENTION, now: float | None = None
) -> list[str]:
    """Remove ``tool_*`` regular files older than *retention* seconds; return their paths.

    Blocking. A missing directory means nothing to do; files that vanish or
    cannot be removed are skipped and logged.
    """
    cutoff = (time.time() if now is None else now) - retention
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    return [e.path for e in entries if _expired(e, cutoff) and _remove(e.path)]


def _expired(entry: os.DirEntry[str], cutoff: float) -> bool:
    if not entry.name.startswith(_PREFIX):
        return False
    try:
        return entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff
    except OSError:
        return False


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
    except OSError as exc:
        _log.warning(
            "managed tool output not removed",
            extra={"path": path, "error": str(exc)},
        )
        return False
    return True


async def run_tool_output_cleanup(
    directory: str,
    *,
    every: float = DEFAULT_CLEANUP_EVERY,
    retention: float = DEFAULT_RETENTION,
    clock: Callable[[], float] = time.time,
) -> None:
    """Clean *directory* now and then every *every* seconds, forever.

    Runs until cancelled; cancellation may abandon a sweep in its worker thread
    (removals are independent, so a half sweep is harmless).
    """
    while True:
        removed = await trio.to_thread.run_sync(
            lambda: cleanup_tool_output(directory, retention=retention, now=clock()),
            abandon_on_cancel=True,
        )
        if removed:
            _log.info("managed tool output expired", extra={"removed": len(removed)})
        await trio.sleep(every)
