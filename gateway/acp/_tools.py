"""How a tool call looks to an editor: its ACP kind, title, file locations and diffs, worked
out from the tool's name and input alone (sans-IO: nothing is read, so a replayed call
looks as it did live)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from gateway.acp._wire import DiffContent, ToolCallContent, ToolCallLocation, ToolKind
from runtime.tools import ToolError, parse_patch

__all__ = ["ToolView", "tool_view"]

_KINDS: Final[Mapping[str, ToolKind]] = {
    "read": "read",
    "write": "edit",
    "edit": "edit",
    "apply_patch": "edit",
    "glob": "search",
    "grep": "search",
    "lsp": "search",
    "shell": "execute",
    "webfetch": "fetch",
    "websearch": "fetch",
    "todowrite": "think",
    "todoread": "think",
    "task": "think",
    "question": "other",
    "skill": "other",
    "plan_enter": "switch_mode",
    "plan_exit": "switch_mode",
}
_TITLE_CHARS: Final = 120


class ToolView:
    """A call's kind, title, locations (absolute paths) and diffs (edits only)."""

    __slots__ = ("diffs", "kind", "locations", "title")

    def __init__(
        self, kind: ToolKind, title: str, locations: list[ToolCallLocation],
        diffs: list[ToolCallContent],
    ) -> None:  # fmt: skip
        self.kind = kind
        self.title = title
        self.locations = locations
        self.diffs = diffs


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _TITLE_CHARS else line[: _TITLE_CHARS - 1] + "…"


def _text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def tool_view(name: str, data: Any, directory: str) -> ToolView:
    """How call *name* with input *data* in a session working in *directory* is shown.

    An input that is not what the tool takes (the model's mistake) is shown by the tool's
    name alone; the call itself fails as usual.
    """
    kind: ToolKind = _KINDS.get(name, "other")
    given: Mapping[str, Any] = data if isinstance(data, Mapping) else {}

    def where(path: str) -> str:
        return os.path.normpath(os.path.join(directory, path))

    path = _text(given, "filePath")
    if name in ("read", "write", "edit") and path is not None:
        location = ToolCallLocation(path=where(path))
        offset = given.get("offset")
        if name == "read" and isinstance(offset, int) and offset > 1:
            location = ToolCallLocation(path=where(path), line=offset)
        verb = {"read": "Read", "write": "Write", "edit": "Edit"}[name]
        return ToolView(kind, f"{verb} {path}", [location], _file_diff(name, given, where(path)))
    if name == "apply_patch":
        return _patch_view(kind, given, where)
    if name in ("glob", "grep") and (pattern := _text(given, "pattern")) is not None:
        place = _text(given, "path")
        locations = [ToolCallLocation(path=where(place))] if place else []
        return ToolView(kind, _short(f"{name} {pattern}"), locations, [])
    if name == "shell" and (command := _text(given, "command")) is not None:
        return ToolView(kind, _short(_text(given, "description") or command), [], [])
    if name == "webfetch" and (url := _text(given, "url")) is not None:
        return ToolView(kind, _short(f"Fetch {url}"), [], [])
    if name == "websearch" and (query := _text(given, "query")) is not None:
        return ToolView(kind, _short(f"Search the web: {query}"), [], [])
    if name == "todowrite":
        return ToolView(kind, "Update the plan", [], [])
    if name == "task" and (description := _text(given, "description")) is not None:
        return ToolView(kind, _short(f"Task: {description}"), [], [])
    return ToolView(kind, name, [], [])


def _file_diff(name: str, given: Mapping[str, Any], path: str) -> list[ToolCallContent]:
    """The change an ``edit`` or ``write`` makes, as the text it replaces and the text it
    puts (a ``write``'s old text is not in its input, so it shows as the new file's)."""
    if name == "edit":
        old, new = given.get("oldString"), given.get("newString")
        if isinstance(old, str) and isinstance(new, str):
            return [DiffContent(path=path, old_text=old, new_text=new)]
    if name == "write" and isinstance(content := given.get("content"), str):
        return [DiffContent(path=path, new_text=content)]
    return []


def _patch_view(kind: ToolKind, given: Mapping[str, Any], where: Any) -> ToolView:
    text = _text(given, "patchText")
    try:
        ops = parse_patch(text) if text is not None else []
    except ToolError:
        ops = []
    locations = [ToolCallLocation(path=where(op.path)) for op in ops]
    diffs: list[ToolCallContent] = []
    for op in ops:
        if op.kind == "add":
            diffs.append(DiffContent(path=where(op.path), new_text=op.content))
        elif op.kind == "update":
            for chunk in op.chunks:
                old, new = "\n".join(chunk.old), "\n".join(chunk.new)
                diffs.append(DiffContent(path=where(op.path), old_text=old, new_text=new))
    paths = ", ".join(op.path for op in ops)
    return ToolView(kind, _short(f"Patch {paths}") if paths else "apply_patch", locations, diffs)
