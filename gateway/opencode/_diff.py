"""The files a session changed through Kittiwake's file tools, as OpenCode's diffs
(``SnapshotFileDiff``: ``GET /session/{id}/diff`` and the ``session.diff`` event).

Each file tool call records the files' previous content durably first
(``session.tool.file.before``); a file's diff is its earliest such image in the session
(or after a given message) against what the file holds now. ``file_diffs`` is pure;
``session_diffs`` reads the images and the files (off the trio thread).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from runtime import events as ev
from runtime.tools import file_patch
from storage import EventsOfType, MessageEntry

if TYPE_CHECKING:
    from actors import Runtime

__all__ = ["MAX_DIFF_BYTES", "MAX_IMAGES", "file_diffs", "session_diffs"]

MAX_IMAGES: Final = 10_000
"""Before-image events one diff reads at most (the session's latest)."""
MAX_DIFF_BYTES: Final = 1024 * 1024
"""A file larger than this, before or now, is listed without a patch."""
_BEFORE: Final = "session.tool.file.before"


def _text(content: bytes | None) -> str:
    return "" if content is None else content.decode("utf-8", errors="replace")


def file_diffs(
    first: Mapping[str, bytes | None], now: Mapping[str, bytes | None], root: str,
    *, max_bytes: int = MAX_DIFF_BYTES,
) -> list[dict[str, Any]]:  # fmt: skip
    """OpenCode's ``SnapshotFileDiff`` (``{file, status, additions, deletions, patch}``) of each
    path of *first* (its content before the session changed it, None: absent) whose
    content *now* differs, sorted by path; paths under *root* are relative to it."""
    out: list[dict[str, Any]] = []
    for path in sorted(first):
        before, after = first[path], now.get(path)
        if before == after:
            continue
        status = "added" if before is None else "deleted" if after is None else "modified"
        shown = path.removeprefix(root.rstrip("/") + "/") if path.startswith(root) else path
        item: dict[str, Any] = {"file": shown, "status": status, "additions": 0,
                                "deletions": 0, "patch": ""}  # fmt: skip
        if len(before or b"") <= max_bytes and len(after or b"") <= max_bytes:
            diff = file_patch(_text(before), _text(after), shown)
            item.update(additions=diff.additions, deletions=diff.deletions, patch=diff.patch)
        out.append(item)
    return out


def _read(paths: Sequence[str], max_bytes: int) -> dict[str, bytes | None]:
    """Each file's content (None: absent), at most *max_bytes* + 1 bytes of it (a file
    longer than *max_bytes* is listed without a patch); an unreadable one reads empty."""
    out: dict[str, bytes | None] = {}
    for path in paths:
        try:
            with Path(path).open("rb") as file:
                out[path] = file.read(max_bytes + 1)
        except FileNotFoundError:
            out[path] = None
        except OSError:
            out[path] = b""
    return out


async def session_diffs(
    rt: Runtime, session_id: str, *, message_id: str | None = None,
    max_images: int = MAX_IMAGES, max_bytes: int = MAX_DIFF_BYTES,
) -> list[dict[str, Any]]:  # fmt: skip
    """The ``SnapshotFileDiff`` list of *session_id*: every file its file tools changed (since
    message *message_id*, when given) whose content now differs from before. A revert or
    unrevert under way is waited for first, so that its files are read as it leaves them.

    Raises ``SessionNotFoundError``. Cancellation abandons the reads.
    """
    await rt.sessions.reverts.settled(session_id)
    info = await rt.sessions.get(session_id)
    since = -1
    if message_id is not None:
        entry = await rt.storage.read(MessageEntry(message_id=message_id))
        since = entry[1] if entry is not None and entry[0] == session_id else since
    stored = await rt.storage.read(
        EventsOfType(types=[_BEFORE], session_id=session_id, limit=max_images)
    )
    first: dict[str, bytes | None] = {}
    for item in stored:
        if item.seq < since:
            continue
        image = ev.decode_event(item.data)
        assert isinstance(image, ev.FileBeforeImage)
        for file in image.files:
            if file.path not in first and not file.omitted:
                first[file.path] = file.content
    now = await trio.to_thread.run_sync(_read, list(first), max_bytes)
    return file_diffs(first, now, info.location.directory, max_bytes=max_bytes)
