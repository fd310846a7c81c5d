"""Durable records of revert: the files' before-images a file tool call records, and the
events that roll a session back, forward, or drop the rolled-back messages for good."""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from runtime._record import Event, Record

__all__ = [
    "FileBeforeImage",
    "FileImage",
    "RevertCommitted",
    "RevertInfo",
    "SessionReverted",
    "SessionUnreverted",
]


class RevertInfo(Record, frozen=True):
    """OpenCode's ``Session.revert``: the message (and part) the session is rolled back to."""

    message_id: str
    part_id: str | UnsetType = UNSET
    snapshot: str | UnsetType = UNSET
    diff: str | UnsetType = UNSET


class FileImage(Record, frozen=True):
    """One file's content at a moment: ``content`` is ``None`` when it did not exist;
    ``omitted`` when it was over the recording limit (then ``content`` is ``None`` too
    and the file is never restored from this image)."""

    path: str
    """Absolute path."""
    content: bytes | None
    omitted: bool = False


class FileBeforeImage(Event, frozen=True, tag="session.tool.file.before"):
    """The previous content of the files a file tool call is about to change, durable
    before the change (Kittiwake's; revert restores from it)."""

    assistant_message_id: str
    call_id: str
    files: list[FileImage]


class SessionReverted(Event, frozen=True, tag="session.reverted"):
    """The session is rolled back to ``revert``: messages from seq ``hidden_from`` on are
    hidden. ``files`` is the content each restored file had before any revert, which
    unrevert writes back."""

    revert: RevertInfo
    hidden_from: int
    files: list[FileImage]


class SessionUnreverted(Event, frozen=True, tag="session.unreverted"):
    """The standing revert is undone: hidden messages show again."""


class RevertCommitted(Event, frozen=True, tag="session.revert.committed"):
    """The standing revert's hidden messages are dropped for good (a new prompt came)."""

    message_ids: list[str]
