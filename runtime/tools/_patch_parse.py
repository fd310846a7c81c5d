"""Parsing OpenCode/Codex ``*** Begin Patch`` text and applying update chunks (sans-IO)."""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from runtime.tools._model import ToolError

__all__ = ["PatchOp", "UpdateChunk", "apply_chunks", "parse_patch"]

_BEGIN: Final = "*** Begin Patch"
_END: Final = "*** End Patch"
_ADD: Final = "*** Add File: "
_DELETE: Final = "*** Delete File: "
_UPDATE: Final = "*** Update File: "
_MOVE: Final = "*** Move to: "
_EOF: Final = "*** End of File"


class UpdateChunk(msgspec.Struct, frozen=True, kw_only=True):
    """One ``@@`` section: an optional anchor line, the lines replaced and their replacement."""

    anchor: str | None = None
    old: list[str] = []
    new: list[str] = []
    at_eof: bool = False


class PatchOp(msgspec.Struct, frozen=True, kw_only=True):
    """One file operation of a patch, in patch order."""

    kind: Literal["add", "delete", "update"]
    path: str
    content: str = ""
    chunks: list[UpdateChunk] = []


def parse_patch(text: str) -> list[PatchOp]:
    """Parse every hunk of *text*; raise ``ToolError`` naming the first bad hunk.

    Moves (``*** Move to:``) are refused.
    """
    lines = text.strip().replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != _BEGIN:
        raise ToolError(f"Invalid patch: the first line must be '{_BEGIN}'")
    if lines[-1].strip() != _END:
        raise ToolError(f"Invalid patch: the last line must be '{_END}'")
    ops: list[PatchOp] = []
    body = lines[1:-1]
    i = 0
    while i < len(body):
        op, i = _parse_hunk(body, i, len(ops) + 1)
        ops.append(op)
    if not ops:
        raise ToolError("Invalid patch: no file operations")
    return ops


def _parse_hunk(lines: list[str], i: int, number: int) -> tuple[PatchOp, int]:
    header = lines[i]
    end = _next_header(lines, i + 1)
    body = lines[i + 1 : end]
    if header.startswith(_ADD):
        return _add(header.removeprefix(_ADD).strip(), body, number), end
    if header.startswith(_DELETE):
        _expect_empty(body, number)
        return PatchOp(kind="delete", path=header.removeprefix(_DELETE).strip()), end
    if header.startswith(_UPDATE):
        path = header.removeprefix(_UPDATE).strip()
        return PatchOp(kind="update", path=path, chunks=_chunks(path, body, number)), end
    raise ToolError(f"Invalid patch hunk {number}: unexpected line {header!r}")


def _next_header(lines: list[str], i: int) -> int:
    while i < len(lines) and not (
        lines[i].startswith(("*** Add File: ", "*** Delete File: ", "*** Update File: "))
    ):
        i += 1
    return i


def _expect_empty(body: list[str], number: int) -> None:
    if any(line.strip() for line in body):
        raise ToolError(f"Invalid patch hunk {number}: a delete hunk has no body")


def _add(path: str, body: list[str], number: int) -> PatchOp:
    bad = [line for line in body if not line.startswith("+")]
    if bad:
        raise ToolError(f"Invalid patch hunk {number} ({path}): added lines start with '+'")
    content = "".join(line[1:] + "\n" for line in body)
    return PatchOp(kind="add", path=path, content=content)


def _chunks(path: str, body: list[str], number: int) -> list[UpdateChunk]:
    if body and body[0].startswith(_MOVE):
        raise ToolError(f"Invalid patch hunk {number} ({path}): moves are not supported")
    chunks: list[UpdateChunk] = []
    current: dict[str, list[str]] | None = None
    anchor: str | None = None
    for line in body:
        if line.startswith("@@"):
            _flush(chunks, current, anchor)
            current, anchor = {"old": [], "new": []}, line[2:].strip() or None
        elif line == _EOF:
            _flush(chunks, current, anchor, at_eof=True)
            current, anchor = None, None
        else:
            current = current or {"old": [], "new": []}
            _add_line(current, line, path, number)
    _flush(chunks, current, anchor)
    if not chunks:
        raise ToolError(f"Invalid patch hunk {number} ({path}): an update hunk has no changes")
    return chunks


def _add_line(current: dict[str, list[str]], line: str, path: str, number: int) -> None:
    mark, rest = (line[:1], line[1:]) if line else (" ", "")
    if mark not in (" ", "-", "+"):
        raise ToolError(f"Invalid patch hunk {number} ({path}): unexpected line {line!r}")
    if mark in (" ", "-"):
        current["old"].append(rest)
    if mark in (" ", "+"):
        current["new"].append(rest)


def _flush(
    chunks: list[UpdateChunk],
    current: dict[str, list[str]] | None,
    anchor: str | None,
    *,
    at_eof: bool = False,
) -> None:
    if current is not None and (current["old"] or current["new"]):
        chunks.append(
            UpdateChunk(anchor=anchor, old=current["old"], new=current["new"], at_eof=at_eof)
        )


def apply_chunks(text: str, chunks: list[UpdateChunk], path: str) -> str:
    """Apply update *chunks* to *text* in order; raise ``ToolError`` if one does not fit."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    edits: list[tuple[int, int, list[str]]] = []
    cursor = 0
    for chunk in chunks:
        start, cursor = _locate(lines, chunk, cursor, path)
        edits.append((start, len(chunk.old), chunk.new))
    for start, size, new in reversed(edits):
        lines[start : start + size] = new
    return "\n".join(lines) + "\n"


def _locate(lines: list[str], chunk: UpdateChunk, cursor: int, path: str) -> tuple[int, int]:
    if chunk.anchor is not None:
        found = _seek(lines, [chunk.anchor], cursor, at_eof=False)
        if found is None:
            raise ToolError(f"Could not find context {chunk.anchor!r} in {path}")
        cursor = found + 1
    if not chunk.old:
        return len(lines), len(lines)
    start = _seek(lines, chunk.old, cursor, at_eof=chunk.at_eof)
    if start is None:
        wanted = "\n".join(chunk.old)
        raise ToolError(f"Could not find the lines to replace in {path}:\n{wanted}")
    return start, start + len(chunk.old)


def _seek(lines: list[str], pattern: list[str], cursor: int, *, at_eof: bool) -> int | None:
    starts = range(cursor, len(lines) - len(pattern) + 1)
    if at_eof:
        starts = range(max(cursor, len(lines) - len(pattern)), len(lines) - len(pattern) + 1)
    for norm in (lambda s: s, str.rstrip, str.strip):
        target = [norm(p) for p in pattern]
        for start in starts:
            if [norm(s) for s in lines[start : start + len(pattern)]] == target:
                return start
    return None
