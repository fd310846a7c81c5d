"""Revert planning, sans-IO: which messages a rollback hides and which files get which content.

A revert rolls a session back to a message (optionally to a part of it). Messages from
its creating seq on are hidden (a seq range in ``SessionInfo.hidden``), and every file that
Kittiwake's file tools changed after that point is restored to its content before the
first such change (its earliest ``session.tool.file.before`` image after the cut). The
content the files had before any revert is kept with the revert (``SessionReverted.files``)
so that unrevert can write it back. A prompt admitted while a revert stands drops the
hidden messages for good: their range closes at that prompt's seq.

Shell side effects are not tracked: only ``write``, ``edit`` and ``apply_patch`` record
before-images.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal

import msgspec
from msgspec import UNSET

from runtime._errors import KittiwakeError
from runtime._messages import AssistantMessage, SessionMessage
from runtime._revert_records import FileBeforeImage, FileImage, RevertInfo, SessionReverted
from runtime._schema import SessionInfo

__all__ = [
    "FileChange",
    "HIDDEN_OPEN",
    "MessageNotFoundError",
    "RevertPlan",
    "SessionBusyError",
    "close_hidden",
    "file_changes",
    "hidden_ranges",
    "is_hidden",
    "open_hidden",
    "plan_revert",
    "revert_paths",
    "unrevert_files",
    "visible_rows",
]

HIDDEN_OPEN: Final = 1 << 62
"""The end of the hidden range of a revert that stands."""

Rows = Sequence[tuple[int, SessionMessage]]
Images = Sequence[tuple[int, FileBeforeImage]]


class MessageNotFoundError(KittiwakeError, LookupError):
    """The message (or part) to revert to is not in the session's visible history."""

    tag = "MessageNotFoundError"

    def __init__(self, session_id: str, message_id: str, message: str | None = None) -> None:
        super().__init__(message or f"Message not found: {message_id}")
        self.session_id = session_id
        self.message_id = message_id


class SessionBusyError(KittiwakeError):
    """The session is running (or has prompts waiting): it cannot be reverted now."""

    tag = "SessionBusyError"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id} is busy; wait until it is idle or abort it")
        self.session_id = session_id


class FileChange(msgspec.Struct, frozen=True, kw_only=True):
    """OpenCode's ``FileDiff``: one file's change from its current content to another."""

    path: str
    status: Literal["added", "modified", "deleted"]
    additions: int
    deletions: int
    patch: str


class RevertPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one revert does.

    ``event`` records it (the content before any revert in ``files``); ``restore`` is the
    content to write now, one image per file; ``skipped`` names files whose before-image
    was over the recording limit, left as they are; ``hidden_ids`` the messages it hides.
    """

    event: SessionReverted
    restore: list[FileImage]
    skipped: list[str]
    hidden_ids: list[str]


# -- hidden messages -------------------------------------------------------------------------


def hidden_ranges(info: SessionInfo) -> list[tuple[int, int]]:
    """The session's hidden ``[from, to)`` seq ranges (empty when none)."""
    return [] if info.hidden is UNSET else list(info.hidden)


def is_hidden(seq: int, ranges: Iterable[tuple[int, int]]) -> bool:
    """Whether the message created at *seq* is hidden by *ranges*."""
    return any(start <= seq < end for start, end in ranges)


def visible_rows(rows: Iterable[tuple[int, SessionMessage]], info: SessionInfo) -> list[
    tuple[int, SessionMessage]
]:  # fmt: skip
    """*rows* without the messages the session's reverts hide."""
    ranges = hidden_ranges(info)
    return [row for row in rows if not is_hidden(row[0], ranges)] if ranges else list(rows)


def open_hidden(ranges: Iterable[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """*ranges* with the standing revert's range (if any) replaced by one from *start*."""
    return [*(r for r in ranges if r[1] != HIDDEN_OPEN), (start, HIDDEN_OPEN)]


def close_hidden(ranges: Iterable[tuple[int, int]], end: int | None) -> list[tuple[int, int]]:
    """*ranges* with the standing revert's range closed at *end* (dropped for good), or
    removed when *end* is None (unrevert)."""
    closed: list[tuple[int, int]] = []
    for start, stop in ranges:
        if stop != HIDDEN_OPEN:
            closed.append((start, stop))
        elif end is not None and end > start:
            closed.append((start, end))
    return closed


# -- files -----------------------------------------------------------------------------------


class _Cut(msgspec.Struct, frozen=True):
    hidden_from: int
    message_seq: int
    message_id: str
    parts: frozenset[str]
    """With a part: the ids of the message's content from that part on."""
    by_part: bool


def _cut(rows: Rows, session_id: str, message_id: str, part_id: str | None) -> _Cut:
    for seq, message in rows:
        if message.id != message_id:
            continue
        if part_id is None:
            return _Cut(seq, seq, message_id, frozenset(), False)
        ids = [c.id for c in message.content] if isinstance(message, AssistantMessage) else []
        if part_id not in ids:
            raise MessageNotFoundError(
                session_id, message_id, f"Part not found: {part_id} in message {message_id}"
            )
        return _Cut(seq + 1, seq, message_id, frozenset(ids[ids.index(part_id) :]), True)
    raise MessageNotFoundError(session_id, message_id)


def _reverted(seq: int, image: FileBeforeImage, cut: _Cut) -> bool:
    if not cut.by_part:
        return seq >= cut.message_seq
    if image.assistant_message_id == cut.message_id:
        return image.call_id in cut.parts
    return seq > cut.message_seq


def _earliest(images: Images, cut: _Cut) -> dict[str, FileImage]:
    """Per path, its image before the first change after the cut."""
    found: dict[str, FileImage] = {}
    for seq, image in sorted(images, key=lambda pair: pair[0]):
        if _reverted(seq, image, cut):
            for file in image.files:
                found.setdefault(file.path, file)
    return found


def revert_paths(
    rows: Rows, images: Images, *, session_id: str, message_id: str, part_id: str | None = None,
    previous: SessionReverted | None = None,
) -> list[str]:  # fmt: skip
    """The files whose current content a revert to *message_id* must read (to keep for
    unrevert): those it restores that the standing revert (*previous*) has not kept.

    Raises MessageNotFoundError: no such message (or part) in *rows*.
    """
    cut = _cut(rows, session_id, message_id, part_id)
    kept = {f.path for f in previous.files} if previous is not None else set()
    return sorted(p for p in _earliest(images, cut) if p not in kept)


def plan_revert(
    rows: Rows, images: Images, *, session_id: str, message_id: str, part_id: str | None = None,
    previous: SessionReverted | None, current: Mapping[str, FileImage], timestamp: int,
) -> RevertPlan:  # fmt: skip
    """Plan a revert of *session_id* to *message_id* (and *part_id*, a content id of that
    assistant message): hide the messages from it on (with a part, the ones after it),
    restore the files changed after the cut.

    *rows* is the history as the session shows it (the standing revert's hidden messages
    included, so a revert may move forward: OpenCode's redo); *images* its before-images
    with their seqs; *previous* the standing revert, if any; *current* the present content
    of the paths :func:`revert_paths` named. A file the standing revert restored that this
    cut no longer reaches gets its content from before any revert back.

    Raises MessageNotFoundError: no such message (or part) in *rows*.
    """
    cut = _cut(rows, session_id, message_id, part_id)
    earliest = _earliest(images, cut)
    kept = {f.path: f for f in previous.files} if previous is not None else {}
    final = dict(kept)
    for path in earliest:
        if path not in final and path in current:
            final[path] = current[path]
    restore: list[FileImage] = []
    skipped: list[str] = []
    for path in sorted({*earliest, *kept}):
        image = earliest.get(path, kept.get(path))
        if image is None or image.omitted or final.get(path, image).omitted:
            skipped.append(path)
            continue
        restore.append(image)
    revert = RevertInfo(message_id=message_id, part_id=part_id if part_id else UNSET)
    event = SessionReverted(
        timestamp=timestamp, session_id=session_id, revert=revert, hidden_from=cut.hidden_from,
        files=[final[p] for p in sorted(final)],
    )  # fmt: skip
    hidden_ids = [m.id for seq, m in rows if seq >= cut.hidden_from]
    return RevertPlan(event=event, restore=restore, skipped=skipped, hidden_ids=hidden_ids)


def unrevert_files(previous: SessionReverted) -> list[FileImage]:
    """The content to write back when the standing revert *previous* is undone."""
    return [f for f in previous.files if not f.omitted]


def file_changes(
    current: Mapping[str, FileImage], target: Iterable[FileImage], *, root: str = ""
) -> list[FileChange]:
    """OpenCode ``FileDiff`` entries from each file's *current* content to its *target*
    (paths shown relative to *root* when under it); files that do not change are left out,
    and binary content counts as one changed line."""
    changes: list[FileChange] = []
    for image in target:
        now = current.get(image.path)
        before = None if now is None else now.content
        if before == image.content:
            continue
        path = _relative(image.path, root)
        old, new = _lines(before), _lines(image.content)
        patch = "".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))
        added = sum(
            1 for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")
        )
        removed = sum(
            1 for line in patch.splitlines() if line.startswith("-") and not line.startswith("---")
        )
        status: Literal["added", "modified", "deleted"] = (
            "added" if before is None else "deleted" if image.content is None else "modified"
        )
        changes.append(
            FileChange(path=path, status=status, additions=added, deletions=removed, patch=patch)
        )
    return changes


def _relative(path: str, root: str) -> str:
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if root and path.startswith(prefix) else path


def _lines(content: bytes | None) -> list[str]:
    if content is None:
        return []
    try:
        lines = content.decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        return [f"(binary, {len(content)} bytes)\n"]
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # a last line without its newline still diffs as a line
    return lines
