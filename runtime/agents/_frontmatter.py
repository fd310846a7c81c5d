"""The YAML front matter of agent, command and skill files, read with PyYAML's safe loader.

As OpenCode's reader does, front matter that is not valid YAML is read once more with each
top-level plain value holding a colon (``description: Use when: tests fail``, which other
agents' files often have) taken as the whole text.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["parse_front_matter"]

_FENCE: Final = "---"
# A top-level ``key: value`` line whose value is plain (not quoted, no block scalar).
_PLAIN_ENTRY: Final = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s+([^\s'\"|>].*)$")


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split *text* into its front matter mapping and its body.

    Text without a leading ``---`` fence has no front matter; empty front matter is ``{}``.
    Raises ``ValueError`` for an unterminated fence, YAML that cannot be read (PyYAML's
    message, naming the line), or front matter that is not a mapping.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != _FENCE:
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        raise ValueError("Front matter is not closed by '---'") from None
    block = lines[1:end]
    import yaml  # about 20 ms of start-up, loaded by the first file with front matter

    try:
        data = yaml.safe_load("\n".join(block))
    except yaml.YAMLError as exc:
        try:
            data = yaml.safe_load("\n".join(_colons_as_text(block)))
        except yaml.YAMLError:
            raise ValueError(f"Front matter is not valid YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"Front matter is not a mapping but {type(data).__name__}")
    return data, "\n".join(lines[end + 1 :]).strip("\n")


def _colons_as_text(block: list[str]) -> list[str]:
    """*block* with each top-level plain value that holds ``:`` made a literal block scalar."""
    out: list[str] = []
    for line in block:
        found = _PLAIN_ENTRY.match(line)
        if found is None or ":" not in found[2]:
            out.append(line)
        else:
            out += [f"{found[1]}: |-", "  " + found[2].strip()]
    return out
