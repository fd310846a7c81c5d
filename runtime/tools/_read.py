"""The ``read`` tool: paged UTF-8 text, base64 binary content, listed directories."""

from __future__ import annotations

import base64
import mimetypes
import os
from typing import Annotated, Any, Final

import msgspec

from runtime.llm import FilePart, TextPart
from runtime.tools._authority import ResolvedPath, resolve_path
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool

__all__ = ["ReadInput", "ReadLimits", "is_binary", "read_tool"]

_SNIFF: Final = 8192


class ReadInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Input of ``read``: ``filePath`` relative to the Location, a one-based first line
    (or directory entry) and how many to return."""

    file_path: str
    offset: Annotated[int, msgspec.Meta(ge=1)] = 1
    limit: Annotated[int, msgspec.Meta(ge=1, le=2000)] = 2000


class ReadLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Page bounds of ``read``."""

    max_line_chars: int = 2000
    max_page_bytes: int = 50 * 1024
    max_media_bytes: int = 20 * 1024 * 1024


DESCRIPTION: Final = (
    "Read a file or list a directory; filePath is relative to the project directory. "
    "Text comes back as numbered lines, a page at a time: pass offset (1-based line) and limit "
    "(at most 2000) to page; lines over 2000 characters are cut. Binary files come back as "
    "base64 content. Directories list their children, directories first. Absolute paths are "
    "accepted only for saved tool output."
)


def is_binary(sample: bytes) -> bool:
    """Tell whether *sample* (the start of a file) looks binary: NUL bytes or invalid UTF-8."""
    if b"\0" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(sample) - 3  # a character cut at the sample's end is fine
    return False


def read_tool(limits: ReadLimits | None = None) -> Tool[ReadInput]:
    """The ``read`` tool (permission ``read``, resource: the canonical path)."""
    bounds = limits or ReadLimits()

    async def handler(data: ReadInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        target = resolve_path(env, data.file_path, allow_managed=True)
        io = ctx.io
        if io is None or io.read_text is None or target.managed:
            return await run_blocking(env, lambda: _read(target, data, bounds))
        if not await run_blocking(env, lambda: _is_text_file(target)):
            return await run_blocking(env, lambda: _read(target, data, bounds))
        # A text file as the session's routed I/O sees it (an editor's unsaved buffer).
        text = await io.read_text(ctx, target.absolute)
        return _text_page(target, text, data, bounds)

    return Tool(
        name="read",
        description=DESCRIPTION,
        input_type=ReadInput,
        handler=handler,
        permission="read",
        resources=lambda data, env: [
            resolve_path(env, data.file_path, allow_managed=True).resource
        ],
    )


def _read(target: ResolvedPath, data: ReadInput, bounds: ReadLimits) -> ToolOutput:
    if os.path.isdir(target.absolute):
        return _list_directory(target, data)
    if not os.path.isfile(target.absolute):
        raise ToolError(f"File not found: {data.file_path}")
    with open(target.absolute, "rb") as handle:
        sample = handle.read(_SNIFF)
    if is_binary(sample):
        return _binary(target, bounds)
    with open(target.absolute, encoding="utf-8", errors="replace") as handle:
        return _text_page(target, handle.read(), data, bounds)


def _is_text_file(target: ResolvedPath) -> bool:
    """Whether *target* is a regular file whose start does not look binary."""
    if not os.path.isfile(target.absolute):
        return False
    with open(target.absolute, "rb") as handle:
        return not is_binary(handle.read(_SNIFF))


def _binary(target: ResolvedPath, bounds: ReadLimits) -> ToolOutput:
    size = os.path.getsize(target.absolute)
    if size > bounds.max_media_bytes:
        raise ToolError(f"Binary file too large to read: {target.resource} ({size} bytes)")
    with open(target.absolute, "rb") as handle:
        encoded = base64.b64encode(handle.read()).decode()
    mime = mimetypes.guess_type(target.absolute)[0] or "application/octet-stream"
    part = FilePart(
        mime=mime, url=f"data:{mime};base64,{encoded}", filename=os.path.basename(target.absolute)
    )
    return ToolOutput(
        content=[part], structured={"path": target.resource, "mime": mime, "bytes": size}
    )


def _text_page(target: ResolvedPath, text: str, data: ReadInput, bounds: ReadLimits) -> ToolOutput:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    if data.offset > max(total, 1):
        raise ToolError(f"Offset {data.offset} is past the end of {data.file_path} ({total} lines)")
    shown = _page_lines(lines, data, bounds)
    last = data.offset + len(shown) - 1
    next_offset = last + 1 if last < total else None
    body = "\n".join(shown) + "\n\n" + _footer(data.offset, last, total, next_offset, "lines")
    structured = _page_info(target, "file", data.offset, next_offset, total)
    return ToolOutput(content=[TextPart(text=body)], structured=structured)


def _page_lines(lines: list[str], data: ReadInput, bounds: ReadLimits) -> list[str]:
    shown: list[str] = []
    size = 0
    for number in range(data.offset, min(len(lines), data.offset + data.limit - 1) + 1):
        line = f"{number}: {_cut_line(lines[number - 1], bounds.max_line_chars)}"
        size += len(line.encode()) + 1
        if shown and size > bounds.max_page_bytes:
            break
        shown.append(line)
    return shown


def _cut_line(line: str, max_chars: int) -> str:
    if len(line) <= max_chars:
        return line
    return f"{line[:max_chars]}... (line truncated to {max_chars} chars)"


def _footer(first: int, last: int, total: int, next_offset: int | None, unit: str) -> str:
    if next_offset is None:
        return f"(End of {'file' if unit == 'lines' else 'directory'} - total {total} {unit})"
    return f"(Showing {unit} {first}-{last} of {total}. Use offset={next_offset} to continue.)"


def _page_info(
    target: ResolvedPath, kind: str, offset: int, next_offset: int | None, total: int
) -> dict[str, Any]:
    return {
        "path": target.resource,
        "type": kind,
        "offset": offset,
        "next_offset": next_offset,
        "total": total,
    }


def _list_directory(target: ResolvedPath, data: ReadInput) -> ToolOutput:
    entries = sorted(
        (not entry.is_dir(), entry.name + ("/" if entry.is_dir() else ""))
        for entry in os.scandir(target.absolute)
    )
    names = [name for _, name in entries]
    total = len(names)
    if data.offset > max(total, 1):
        raise ToolError(
            f"Offset {data.offset} is past the end of {data.file_path} ({total} entries)"
        )
    shown = names[data.offset - 1 : data.offset - 1 + data.limit]
    last = data.offset + len(shown) - 1
    next_offset = last + 1 if last < total else None
    body = "\n".join(shown) + "\n\n" + _footer(data.offset, last, total, next_offset, "entries")
    info = _page_info(target, "directory", data.offset, next_offset, total)
    return ToolOutput(content=[TextPart(text=body)], structured={**info, "entries": shown})
