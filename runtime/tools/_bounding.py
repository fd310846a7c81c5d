"""Generic bounding of Model Tool Output (sans-IO).

One settlement gets one aggregate limit: the concatenated text parts (or, with
no text, the structured value as indented JSON) may have at most
``max_lines`` lines and ``max_bytes`` UTF-8 bytes. Over either, the preview
keeps ``ceil(n/2)`` head and ``floor(n/2)`` tail lines of ``max_lines - 4``,
then, if still over ``max_bytes - len(marker) - 4`` bytes, a head and tail cut
on UTF-8 character boundaries, laid out as ``head\\n\\n<marker>\\n\\ntail``.
With ``max_lines <= 4`` (or no byte budget left) the preview is the marker
alone. Media parts and the structured value pass through unchanged.
"""

from __future__ import annotations

from typing import Final

import msgspec

from runtime.llm import TextPart
from runtime.tools._model import ContentPart, ToolOutput, ToolOutputLimits, ToolSuccess

__all__ = ["apply_bounding", "bounding_text", "exceeds_limits", "preview", "truncation_marker"]

_LAYOUT_LINES: Final = 4
_LAYOUT_BYTES: Final = 4


def truncation_marker(path: str | None) -> str:
    """The line that replaces the middle of truncated output, naming the managed file."""
    if path is None:
        return "... output truncated; full content could not be saved ..."
    return f"... output truncated; full content saved to {path} ..."


def bounding_text(output: ToolOutput) -> str | None:
    """The text the limit applies to: joined text parts, else structured JSON, else ``None``."""
    texts = [p.text for p in output.content if isinstance(p, TextPart)]
    if texts:
        return "".join(texts)
    if output.structured is None:
        return None
    return msgspec.json.format(msgspec.json.encode(output.structured), indent=2).decode()


def exceeds_limits(text: str, limits: ToolOutputLimits) -> bool:
    """Tell whether *text* has more lines or UTF-8 bytes than *limits* allow."""
    if text.count("\n") + 1 > limits.max_lines:
        return True
    return len(text) > limits.max_bytes // 4 and len(text.encode()) > limits.max_bytes


def preview(text: str, limits: ToolOutputLimits, marker: str) -> str:
    """Head and tail of *text* around *marker*, within *limits* (see the module doc)."""
    byte_budget = limits.max_bytes - len(marker.encode()) - _LAYOUT_BYTES
    line_budget = limits.max_lines - _LAYOUT_LINES
    if line_budget <= 0 or byte_budget < 0:
        return marker
    head_src, tail_src = _cut_lines(text, line_budget)
    if tail_src is None:
        if len(head_src) <= byte_budget:
            return f"{text}\n\n{marker}\n\n"
        tail_src = head_src
    elif len(head_src) + len(tail_src) <= byte_budget:
        return f"{head_src.decode()}\n\n{marker}\n\n{tail_src.decode()}"
    head = _utf8_prefix(head_src, (byte_budget + 1) // 2)
    tail = _utf8_suffix(tail_src, byte_budget // 2)
    return f"{head}\n\n{marker}\n\n{tail}"


def _cut_lines(text: str, budget: int) -> tuple[bytes, bytes | None]:
    """Head and tail line ranges as UTF-8; the whole text and ``None`` when no cut is needed.

    Scans only the kept lines, never splits the whole text.
    """
    if text.count("\n") < budget:
        return text.encode(), None
    head_n, tail_n = (budget + 1) // 2, budget // 2
    head_end = -1
    for _ in range(head_n):
        head_end = text.index("\n", head_end + 1)
    tail_start = len(text)
    for _ in range(tail_n):
        tail_start = text.rindex("\n", 0, tail_start)
    tail = text[tail_start + 1 :] if tail_n else ""
    return text[:head_end].encode(), tail.encode()


def _utf8_prefix(data: bytes, size: int) -> str:
    return data[:size].decode("utf-8", errors="ignore")


def _utf8_suffix(data: bytes, size: int) -> str:
    if size <= 0:
        return ""
    return data[-size:].decode("utf-8", errors="ignore")


def apply_bounding(
    output: ToolOutput, text: str, path: str | None, limits: ToolOutputLimits
) -> ToolSuccess:
    """Replace the text of an over-limit *output* by its preview.

    *path* is the Managed Tool Output File holding *text*, or ``None`` when it
    could not be retained (the result is then ``lossy``). The tool's own
    output paths come first and survive.
    """
    part = TextPart(text=preview(text, limits, truncation_marker(path)))
    content = _replace_text(output.content, part)
    paths = [*output.output_paths, *([path] if path else [])]
    return ToolSuccess(
        content=content, structured=output.structured, output_paths=paths, lossy=path is None
    )


def _replace_text(content: list[ContentPart], part: TextPart) -> list[ContentPart]:
    media = [p for p in content if not isinstance(p, TextPart)]
    first = next((i for i, p in enumerate(content) if isinstance(p, TextPart)), 0)
    before = sum(1 for p in content[:first] if not isinstance(p, TextPart))
    return [*media[:before], part, *media[before:]]
