"""Setting one key of a JSONC configuration file in place: every other byte (comments,
formatting, trailing commas, ``{env:}`` references) stays as it was, as OpenCode's
``jsonc-parser`` ``modify`` does for ``opencode mcp add``."""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from runtime.config._core import validate_document
from runtime.config._jsonc import ConfigError, parse_jsonc

__all__ = ["set_jsonc_value", "write_config_value"]

_SKIP: Final = re.compile(rb"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR: Final = re.compile(rb"[^\s,\]}/]+")
_TAIL: Final = re.compile(rb"[ \t]*(,)?[ \t]*(?://[^\n]*|/\*[^\n]*?\*/)?[ \t\r]*")
"""What may follow a member on its line: a comma, a comment."""


@dataclass
class _Object:
    """Where an object's braces and members are in the text."""

    open: int
    close: int = 0
    members: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """key -> (key start, value start, value end)."""
    objects: dict[str, _Object] = field(default_factory=dict)
    """key -> the member's value, when it is an object."""


def _skip(raw: bytes, at: int) -> int:
    match = _SKIP.match(raw, at)
    return match.end() if match else at


def _value(raw: bytes, at: int) -> tuple[int, _Object | None]:
    """The end of the value at *at* (comments skipped before it), and its object."""
    first = raw[at : at + 1]
    if first == b"{":
        found = _object(raw, at)
        return found.close + 1, found
    if first == b"[":
        at = _skip(raw, at + 1)
        while raw[at : at + 1] != b"]":
            at, _ = _value(raw, at)
            at = _skip(raw, at)
            if raw[at : at + 1] == b",":
                at = _skip(raw, at + 1)
        return at + 1, None
    match = (_STRING if first == b'"' else _SCALAR).match(raw, at)
    assert match is not None, at
    return match.end(), None


def _object(raw: bytes, at: int) -> _Object:
    found = _Object(open=at)
    at = _skip(raw, at + 1)
    while raw[at : at + 1] != b"}":
        key = _STRING.match(raw, at)
        assert key is not None, at
        name = msgspec.json.decode(key.group(), type=str)
        start = _skip(raw, _skip(raw, key.end()) + 1)  # past the colon
        end, inner = _value(raw, start)
        found.members[name] = (at, start, end)
        if inner is not None:
            found.objects[name] = inner
        at = _skip(raw, end)
        if raw[at : at + 1] == b",":
            at = _skip(raw, at + 1)
    found.close = at
    return found


def _indent_of(raw: bytes, at: int) -> bytes:
    line = raw.rfind(b"\n", 0, at) + 1
    return re.match(rb"[ \t]*", raw[line:at]).group()  # type: ignore[union-attr]


def _rendered(value: Any, indent: bytes, unit: bytes = b"  ") -> bytes:
    text = json.dumps(value, indent=unit.decode(), ensure_ascii=False).encode()
    return text.replace(b"\n", b"\n" + indent)


def set_jsonc_value(text: str, path: tuple[str, ...], value: Any) -> str:
    """*text* (a JSONC object) with the key *path* set to *value*: a member that exists is
    replaced, a missing one is added at the end of its object (missing objects on the way
    too), indented as its neighbours; nothing else changes.

    Raises:
        ConfigError: *text* is not a JSONC object (``source`` says "configuration").
    """
    assert path, "a key path names at least one key"
    document, _ = parse_jsonc(text, source="configuration")
    if not isinstance(document, dict):
        raise ConfigError("a configuration must be a JSON object", source="configuration")
    raw = text.encode()
    if not raw.strip():
        raw = b"{}\n"
    node = _object(raw, _skip(raw, 0))
    for depth, key in enumerate(path):
        rest = path[depth + 1 :]
        inner = node.objects.get(key)
        if key in node.members and (not rest or inner is None):
            nested: Any = value
            for part in reversed(rest):
                nested = {part: nested}
            key_at, start, end = node.members[key]
            indent = _indent_of(raw, key_at)
            unit = _unit(indent, _indent_of(raw, node.close))
            replaced = raw[:start] + _rendered(nested, indent, unit) + raw[end:]
            return replaced.decode()
        if inner is None:
            nested = value
            for part in reversed(rest):
                nested = {part: nested}
            return _insert(raw, node, key, nested).decode()
        node = inner
    raise AssertionError("unreachable: the loop returns at the last key")


def _insert(raw: bytes, node: _Object, key: str, value: Any) -> bytes:
    closing = _indent_of(raw, node.close)
    if not node.members:
        indent = _indent_of(raw, node.open) + b"  "
        inside = raw[node.open + 1 : node.close].rstrip(b" \t")
        member = b"\n" + indent + _member(key, value, indent, b"  ")
        return raw[: node.open + 1] + inside + member + b"\n" + closing + raw[node.close :]
    first = min(at for at, _, _ in node.members.values())
    indent = _indent_of(raw, first)
    unit = _unit(indent, closing)
    end = max(end for _, _, end in node.members.values())
    line_end = raw.find(b"\n", end)
    tail = _TAIL.fullmatch(raw, end, line_end) if line_end >= 0 else None
    member = b"\n" + indent + _member(key, value, indent, unit)
    if tail is None:  # more on the last member's line: the new one goes right after it
        return raw[:end] + b"," + member + raw[end:]
    comma = b"" if tail.group(1) else b","  # after the line's comment, if any
    return raw[:end] + comma + raw[end:line_end] + member + raw[line_end:]


def _unit(indent: bytes, closing: bytes) -> bytes:
    """One level of indentation: what a member has beyond its object's closing brace."""
    return indent[len(closing) :] if indent.startswith(closing) and indent != closing else b"  "


def _member(key: str, value: Any, indent: bytes, unit: bytes) -> bytes:
    return msgspec.json.encode(key) + b": " + _rendered(value, indent, unit)


def write_config_value(path: str, keys: tuple[str, ...], value: Any) -> str:
    """Set the key path *keys* of the configuration file at *path* to *value*, keeping
    the file's comments and layout (:func:`set_jsonc_value`), and replace the file
    atomically (a new file in the same folder, then a rename). A missing file is
    created. Blocking. Returns the file's new text.

    Raises:
        ConfigError: the file, or the result, is not a valid configuration (nothing is
            written then). ``OSError`` when the file cannot be written.
    """
    import tempfile

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = "{}\n"
    try:
        edited = set_jsonc_value(text, keys, value)
    except ConfigError as exc:
        raise ConfigError(exc.message, source=path, line=exc.line, column=exc.column) from None
    document, _ = parse_jsonc(edited, source=path)
    validate_document(document, source=path)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kittiwake-", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(edited)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return edited
