"""The ``write`` and ``edit`` tools (permission ``edit``)."""

from __future__ import annotations

import os
from typing import Final

import msgspec

from runtime.llm import TextPart
from runtime.tools._authority import ResolvedPath, resolve_path
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool

__all__ = ["EditInput", "WriteInput", "edit_tool", "write_text", "write_tool"]


class WriteInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``write``: a path relative to the Location and the whole new content."""

    path: str
    content: str


class EditInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``edit``: replace *old_string* (exactly, once unless *replace_all*)."""

    path: str
    old_string: str
    new_string: str
    replace_all: bool = False


WRITE_DESCRIPTION: Final = (
    "Write a whole file (created with its parent directories, or overwritten), by path "
    "relative to the project directory."
)
EDIT_DESCRIPTION: Final = (
    "Replace exact text in a file. old_string must occur exactly once unless replace_all is "
    "true; include surrounding lines to make it unique. Paths are relative to the project "
    "directory."
)


def _edit_resources(path: str, env: ToolEnvironment) -> list[str]:
    return [resolve_path(env, path).resource]


def write_tool() -> Tool[WriteInput]:
    """The ``write`` tool."""

    async def handler(data: WriteInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        target = resolve_path(env, data.path)
        return await run_blocking(env, lambda: _write(target, data.content))

    return Tool(
        name="write",
        description=WRITE_DESCRIPTION,
        input_type=WriteInput,
        handler=handler,
        permission="edit",
        resources=lambda data, env: _edit_resources(data.path, env),
        touched=lambda structured: [structured["path"]],
        changes=lambda data, env: [resolve_path(env, data.path).absolute],
    )


def write_text(target: ResolvedPath, content: str) -> int:
    """Write *content* as UTF-8, creating parent directories; return the byte count.

    Raises ``ToolError`` when the target is a directory.
    """
    if os.path.isdir(target.absolute):
        raise ToolError(f"Is a directory: {target.resource}")
    os.makedirs(os.path.dirname(target.absolute), exist_ok=True)
    data = content.encode()
    with open(target.absolute, "wb") as handle:
        handle.write(data)
    return len(data)


def _write(target: ResolvedPath, content: str) -> ToolOutput:
    created = not os.path.exists(target.absolute)
    size = write_text(target, content)
    verb = "Created" if created else "Wrote"
    return ToolOutput(
        content=[TextPart(text=f"{verb} {target.resource} ({size} bytes)")],
        structured={"path": target.resource, "bytes": size, "created": created},
    )


def edit_tool() -> Tool[EditInput]:
    """The ``edit`` tool."""

    async def handler(data: EditInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        target = resolve_path(env, data.path)
        return await run_blocking(env, lambda: _edit(target, data))

    return Tool(
        name="edit",
        description=EDIT_DESCRIPTION,
        input_type=EditInput,
        handler=handler,
        permission="edit",
        resources=lambda data, env: _edit_resources(data.path, env),
        touched=lambda structured: [structured["path"]],
        changes=lambda data, env: [resolve_path(env, data.path).absolute],
    )


def _edit(target: ResolvedPath, data: EditInput) -> ToolOutput:
    if not data.old_string:
        raise ToolError("old_string must not be empty; use write to create a file")
    if data.old_string == data.new_string:
        raise ToolError("old_string and new_string are identical")
    if not os.path.isfile(target.absolute):
        raise ToolError(f"File not found: {target.resource}")
    with open(target.absolute, encoding="utf-8") as handle:
        text = handle.read()
    count = text.count(data.old_string)
    _check_count(count, data, target)
    limit = -1 if data.replace_all else 1
    write_text(target, text.replace(data.old_string, data.new_string, limit))
    return ToolOutput(
        content=[TextPart(text=f"Edited {target.resource}: {count} replacement(s)")],
        structured={"path": target.resource, "replacements": count},
    )


def _check_count(count: int, data: EditInput, target: ResolvedPath) -> None:
    if count == 0:
        raise ToolError(f"old_string not found in {target.resource}")
    if count > 1 and not data.replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {target.resource}; add surrounding context "
            "to make it unique, or set replace_all"
        )
