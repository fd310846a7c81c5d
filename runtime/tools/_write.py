"""The ``write`` and ``edit`` tools (permission ``edit``).

The structured result of ``edit``, and of a ``write`` that replaced a file, holds the unified
diff of the change (``diff``, up to ``ToolEnvironment.diff_max_bytes``), which clients show.
"""

from __future__ import annotations

import os
from typing import Any, Final

import msgspec

from runtime.llm import TextPart
from runtime.tools._authority import ResolvedPath, resolve_path
from runtime.tools._diff import file_patch
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool

__all__ = ["EditInput", "WriteInput", "edit_tool", "write_text", "write_tool"]


class WriteInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Input of ``write``: ``filePath`` relative to the Location and the whole new
    ``content``."""

    file_path: str
    content: str


class EditInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Input of ``edit``: in ``filePath``, replace ``oldString`` by ``newString`` (exactly,
    once unless ``replaceAll``)."""

    file_path: str
    old_string: str
    new_string: str
    replace_all: bool = False


WRITE_DESCRIPTION: Final = (
    "Write a whole file (created with its parent directories, or overwritten); filePath is "
    "relative to the project directory."
)
EDIT_DESCRIPTION: Final = (
    "Replace exact text in a file. oldString must occur exactly once unless replaceAll is "
    "true; include surrounding lines to make it unique. filePath is relative to the project "
    "directory."
)


def _edit_resources(path: str, env: ToolEnvironment) -> list[str]:
    return [resolve_path(env, path).resource]


def write_tool() -> Tool[WriteInput]:
    """The ``write`` tool."""

    async def handler(data: WriteInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        target = resolve_path(env, data.file_path)
        io = ctx.io
        if io is None or io.write_text is None:
            return await run_blocking(env, lambda: _write(target, data.content, env))
        created, previous = await run_blocking(env, lambda: _prior(target, env))
        if not created and io.read_text is not None:
            previous = await io.read_text(ctx, target.absolute)  # what the write replaces
        await io.write_text(ctx, target.absolute, data.content)
        size = len(data.content.encode())
        return _written(target, data.content, size, created, previous, env)

    return Tool(
        name="write",
        description=WRITE_DESCRIPTION,
        input_type=WriteInput,
        handler=handler,
        permission="edit",
        resources=lambda data, env: _edit_resources(data.file_path, env),
        touched=lambda structured: [structured["path"]],
        changes=lambda data, env: [resolve_path(env, data.file_path).absolute],
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


def _write(target: ResolvedPath, content: str, env: ToolEnvironment) -> ToolOutput:
    created, previous = _prior(target, env)
    size = write_text(target, content)
    return _written(target, content, size, created, previous, env)


def _prior(target: ResolvedPath, env: ToolEnvironment) -> tuple[bool, str | None]:
    """Whether writing *target* creates it, and its text now when small enough for a diff.
    Raises ``ToolError`` when it is a directory."""
    if os.path.isdir(target.absolute):
        raise ToolError(f"Is a directory: {target.resource}")
    created = not os.path.exists(target.absolute)
    return created, None if created else _small_text(target, env.before_image_max_bytes)


def _written(
    target: ResolvedPath, content: str, size: int, created: bool, previous: str | None,
    env: ToolEnvironment,
) -> ToolOutput:  # fmt: skip
    verb = "Created" if created else "Wrote"
    structured: dict[str, Any] = {"path": target.resource, "bytes": size, "created": created}
    if previous is not None:
        _add_diff(structured, previous, content, target, env)
    return ToolOutput(
        content=[TextPart(text=f"{verb} {target.resource} ({size} bytes)")], structured=structured
    )


def _small_text(target: ResolvedPath, limit: int) -> str | None:
    """The regular file's text when it is at most *limit* bytes, else ``None``."""
    if not os.path.isfile(target.absolute) or os.path.getsize(target.absolute) > limit:
        return None
    with open(target.absolute, "rb") as handle:
        return handle.read(limit + 1).decode("utf-8", errors="replace")


def _add_diff(
    structured: dict[str, Any], before: str, after: str, target: ResolvedPath,
    env: ToolEnvironment,
) -> None:  # fmt: skip
    """Put the diff from *before* to *after* in *structured* (``diff``) unless either text
    is longer than ``env.before_image_max_bytes`` or the diff than ``env.diff_max_bytes``."""
    limit = env.before_image_max_bytes
    if len(before) > limit or len(after) > limit:
        return
    diff = file_patch(before, after, target.resource).patch
    if len(diff.encode()) <= env.diff_max_bytes:
        structured["diff"] = diff


def edit_tool() -> Tool[EditInput]:
    """The ``edit`` tool."""

    async def handler(data: EditInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        target = resolve_path(env, data.file_path)
        io = ctx.io
        if io is None or (io.read_text is None and io.write_text is None):
            return await run_blocking(env, lambda: _edit(target, data, env))
        text = await run_blocking(env, lambda: _edited_text(target, data))
        if io.read_text is not None:
            text = await io.read_text(ctx, target.absolute)  # the editor's buffer
        edited, count = _replace(text, data, target)
        if io.write_text is not None:
            await io.write_text(ctx, target.absolute, edited)
        else:
            await run_blocking(env, lambda: write_text(target, edited))
        return _edit_output(target, text, edited, count, env)

    return Tool(
        name="edit",
        description=EDIT_DESCRIPTION,
        input_type=EditInput,
        handler=handler,
        permission="edit",
        resources=lambda data, env: _edit_resources(data.file_path, env),
        touched=lambda structured: [structured["path"]],
        changes=lambda data, env: [resolve_path(env, data.file_path).absolute],
    )


def _edit(target: ResolvedPath, data: EditInput, env: ToolEnvironment) -> ToolOutput:
    text = _edited_text(target, data)
    edited, count = _replace(text, data, target)
    write_text(target, edited)
    return _edit_output(target, text, edited, count, env)


def _edited_text(target: ResolvedPath, data: EditInput) -> str:
    """The text of the file an edit with *data* changes; raises ``ToolError`` for an
    edit that cannot be made (empty or unchanged strings, no such file)."""
    if not data.old_string:
        raise ToolError("oldString must not be empty; use write to create a file")
    if data.old_string == data.new_string:
        raise ToolError("oldString and newString are identical")
    if not os.path.isfile(target.absolute):
        raise ToolError(f"File not found: {target.resource}")
    with open(target.absolute, encoding="utf-8") as handle:
        return handle.read()


def _replace(text: str, data: EditInput, target: ResolvedPath) -> tuple[str, int]:
    """*text* edited by *data*, and how many occurrences there were."""
    count = text.count(data.old_string)
    _check_count(count, data, target)
    limit = -1 if data.replace_all else 1
    return text.replace(data.old_string, data.new_string, limit), count


def _edit_output(
    target: ResolvedPath, text: str, edited: str, count: int, env: ToolEnvironment
) -> ToolOutput:
    structured: dict[str, Any] = {"path": target.resource, "replacements": count}
    _add_diff(structured, text, edited, target, env)
    return ToolOutput(
        content=[TextPart(text=f"Edited {target.resource}: {count} replacement(s)")],
        structured=structured,
    )


def _check_count(count: int, data: EditInput, target: ResolvedPath) -> None:
    if count == 0:
        raise ToolError(f"oldString not found in {target.resource}")
    if count > 1 and not data.replace_all:
        raise ToolError(
            f"oldString occurs {count} times in {target.resource}; add surrounding context "
            "to make it unique, or set replaceAll"
        )
