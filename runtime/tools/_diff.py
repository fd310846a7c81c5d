"""Unified diffs of a file's text, as ``diff -u`` and OpenCode's patches show them."""

from __future__ import annotations

import difflib

import msgspec

__all__ = ["FilePatch", "file_patch", "patch_counts"]

_NO_NEWLINE = "\n\\ No newline at end of file\n"


class FilePatch(msgspec.Struct, frozen=True, kw_only=True):
    """A unified diff (``--- a/…``, ``+++ b/…``, hunks; empty when nothing changed) and its
    counts of added and deleted lines."""

    patch: str
    additions: int
    deletions: int


def file_patch(before: str, after: str, name: str) -> FilePatch:
    """The unified diff (three lines of context) turning *before* into *after*, headed
    ``a/{name}`` and ``b/{name}``; a last line without a newline is marked as ``diff``
    marks it."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True),
            fromfile=f"a/{name}", tofile=f"b/{name}",
        )
    )  # fmt: skip
    patch = "".join(line if line.endswith("\n") else line + _NO_NEWLINE for line in lines)
    additions, deletions = patch_counts(patch)
    return FilePatch(patch=patch, additions=additions, deletions=deletions)


def patch_counts(patch: str) -> tuple[int, int]:
    """The added and deleted lines of a unified diff of one file (after its two header
    lines)."""
    body = patch.splitlines()[2:]
    return sum(1 for line in body if line[:1] == "+"), sum(1 for line in body if line[:1] == "-")
