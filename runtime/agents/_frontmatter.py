"""A small reader for the YAML-like front matter of agent files.

Supports nested mappings by indentation, ``#`` comments, quoted keys and
values, and scalars (``true``/``false``, ``null``, integers, floats, strings).
Lists and multi-line values are not supported and raise ``ValueError``.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["parse_front_matter"]

_FENCE: Final = "---"
_NUMBER: Final = re.compile(r"^-?\d+(\.\d+)?$")


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split *text* into its front matter mapping and its body.

    Text without a leading ``---`` fence has no front matter. Raises
    ``ValueError`` (naming the line) for an unterminated fence or a line it
    cannot read.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != _FENCE:
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        raise ValueError("Front matter is not closed by '---'") from None
    return _parse_block(lines[1:end]), "\n".join(lines[end + 1 :]).strip("\n")


def _parse_block(lines: list[str]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for number, raw in enumerate(lines, start=2):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, value = _split(stripped, number)
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value:
            parent[key] = _scalar(value)
        else:
            child: dict[str, Any] = {}
            parent[key] = child
            stack.append((indent, child))
    return root


def _split(line: str, number: int) -> tuple[str, str]:
    if line.startswith("- "):
        raise ValueError(f"Front matter line {number}: lists are not supported")
    if line[0] in "\"'":
        close = line.find(line[0], 1)
        key, rest = line[1:close], line[close + 1 :]
    else:
        key, _, tail = line.partition(":")
        rest = ":" + tail if _ else ""
    if not rest.startswith(":"):
        raise ValueError(f"Front matter line {number}: expected 'key: value'")
    return key.strip(), _strip_comment(rest[1:].strip())


def _strip_comment(value: str) -> str:
    if value[:1] in ("'", '"'):
        return value
    return value.split(" #", 1)[0].strip()


def _scalar(value: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    if _NUMBER.match(value):
        return float(value) if "." in value else int(value)
    return value
