"""Names of MCP tools and prompts in a Location, as OpenCode forms them (pure)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from typing import Final

__all__ = ["MAX_TOOL_NAME", "command_name", "sanitize", "tool_ids"]

MAX_TOOL_NAME: Final = 64
_OUTSIDE: Final = re.compile(r"[^a-zA-Z0-9_-]")
_HASH: Final = 8


def sanitize(name: str) -> str:
    """*name* with every character outside ``[a-zA-Z0-9_-]`` replaced by ``_``."""
    return _OUTSIDE.sub("_", name)


def command_name(server: str, prompt: str) -> str:
    """The slash command of a server's prompt: ``<server>:<prompt>``, each sanitized."""
    return f"{sanitize(server)}:{sanitize(prompt)}"


def _hashed(base: str, server: str, tool: str) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH]
    return f"{base[: MAX_TOOL_NAME - _HASH - 1]}_{digest}"


def tool_ids(
    tools: Iterable[tuple[str, str]], *, reserved: Collection[str] = ()
) -> dict[tuple[str, str], str]:
    """The tool id of each ``(server, tool)``: ``<server>_<tool>`` sanitized, prefixed
    ``mcp_`` when it would not start with a letter. An id over 64 characters, one
    another pair already took (pairs taken in sorted order) or one of *reserved* is cut
    and ends with ``_`` and 8 hex digits of a hash of the pair, so each pair keeps one
    id."""
    out: dict[tuple[str, str], str] = {}
    taken: set[str] = set(reserved)
    for server, tool in sorted(set(tools)):
        base = f"{sanitize(server)}_{sanitize(tool)}"
        if not base[:1].isalpha():
            base = f"mcp_{base}"
        name = base if len(base) <= MAX_TOOL_NAME else _hashed(base, server, tool)
        if name in taken:
            name = _hashed(base, server, tool)
        taken.add(name)
        out[(server, tool)] = name
    return out
