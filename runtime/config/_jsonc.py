"""JSONC as OpenCode reads it: JSON plus ``//`` and ``/* */`` comments and trailing commas.

Comments and trailing commas are blanked to spaces (newlines kept), so every byte of the
cleaned text sits where it sat in the source and msgspec's error offsets map straight back
to a line and column. The same pass records where each key path's value starts, so a later
type error can name its line and column too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final, TypeAlias

import msgspec

__all__ = [
    "ConfigError",
    "KeyOffsets",
    "KeyPath",
    "lookup_offset",
    "parse_jsonc",
    "position",
    "render_path",
]

KeyPath: TypeAlias = tuple[str | int, ...]
"""A key path into a document: object keys and array indexes from the root."""

_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?(?:\*/|\Z)|[{}\[\],:]', re.S)
_SPACE: Final = re.compile(rb"[ \t\r\n]*")
_STRING: Final = rb'"(?:[^"\\]|\\.)*"'
_COMMENT: Final = re.compile(_STRING + rb"|//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_TRAILING: Final = re.compile(_STRING + rb"|,(?=[ \t\r\n]*[}\]])")
_NOT_NEWLINE: Final = re.compile(rb"[^\n]")
_BYTE: Final = re.compile(r"\(byte (\d+)\)")
_IDENT: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_decode_key: Final = msgspec.json.Decoder(str).decode


class ConfigError(Exception):
    """A configuration source that cannot be used: a syntax error, a wrong type, a bad
    ``{file:}`` reference. ``str()`` reads ``file:line:column: key path: message``."""

    def __init__(
        self, message: str, *, source: str, line: int | None = None,
        column: int | None = None, path: KeyPath = (),
    ) -> None:  # fmt: skip
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.path = path
        where = source if line is None else f"{source}:{line}:{column}"
        at = f" {render_path(path)}:" if path else ""
        super().__init__(f"{where}:{at} {message}")


def render_path(path: KeyPath) -> str:
    """``provider.local.models["gpt-4o"].limit`` style: dots for plain keys, brackets else."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.fullmatch(part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{msgspec.json.encode(part).decode()}]")
    return "".join(out)


def position(text: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of byte *offset* in *text*; columns count characters."""
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind(b"\n", 0, offset) + 1
    column = len(text[line_start:offset].decode("utf-8", "replace")) + 1
    return text.count(b"\n", 0, offset) + 1, column


def parse_jsonc(text: str | bytes, *, source: str) -> tuple[Any, Mapping[KeyPath, int]]:
    """Parse JSONC *text*; returns the document and where each key path's value starts
    (worked out on first use: only errors and diagnostics need it).

    Raises:
        ConfigError: a syntax error, naming *source*, line and column.
    """
    raw = text.encode() if isinstance(text, str) else text
    cleaned = _clean(raw, source)
    offsets = KeyOffsets(raw)
    if not cleaned.strip():
        return {}, offsets
    try:
        return msgspec.json.decode(cleaned), offsets
    except msgspec.DecodeError as exc:
        found = _BYTE.search(str(exc))
        at = int(found.group(1)) if found else len(raw)
        line, column = position(raw, at)
        message = _BYTE.sub("", str(exc)).strip().removeprefix("JSON is malformed: ")
        raise ConfigError(message, source=source, line=line, column=column) from None


def _clean(raw: bytes, source: str) -> bytes:
    """*raw* with comments and trailing commas blanked (same length, newlines kept)."""
    if b"/" not in raw and b"," not in raw:
        return raw

    def comment(match: re.Match[bytes]) -> bytes:
        token = match.group()
        if token[:1] == b'"':
            return token
        if token.startswith(b"/*") and (len(token) < 4 or not token.endswith(b"*/")):
            line, column = position(raw, match.start())
            raise ConfigError("unterminated comment", source=source, line=line, column=column)
        return _NOT_NEWLINE.sub(b" ", token)

    blanked = _COMMENT.sub(comment, raw) if b"/" in raw else raw
    return _TRAILING.sub(lambda m: m.group() if m.group()[:1] == b'"' else b" ", blanked)


class KeyOffsets(Mapping[KeyPath, int]):
    """Where each key path's value starts in a JSONC text, scanned on first use."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._offsets: dict[KeyPath, int] | None = None

    def _scanned(self) -> dict[KeyPath, int]:
        if self._offsets is None:
            self._offsets = _scan(self.raw)
        return self._offsets

    def __getitem__(self, path: KeyPath) -> int:
        return self._scanned()[path]

    def __iter__(self) -> Iterator[KeyPath]:
        return iter(self._scanned())

    def __len__(self) -> int:
        return len(self._scanned())


def _scan(raw: bytes) -> dict[KeyPath, int]:
    """Note each key path's value offset (comments skipped)."""
    offsets: dict[KeyPath, int] = {}
    stack: list[list[Any]] = []  # per container: [kind, key or index, path]
    for match in _TOKEN.finditer(raw):
        token = match.group()
        first = token[:1]
        if first == b"/":
            continue
        if first == b",":
            if stack and stack[-1][0] == "array":
                stack[-1][1] += 1
                _note_value(raw, match.end(), stack, offsets)
        elif first == b":":
            _note_value(raw, match.end(), stack, offsets)
        elif first in b"{[":
            path = _current(stack)
            stack.append(["object", None, path] if first == b"{" else ["array", 0, path])
            if first == b"[":
                _note_value(raw, match.end(), stack, offsets)
        elif first in b"}]":
            if stack:
                stack.pop()
        elif first == b'"' and stack and stack[-1][0] == "object" and _is_key(raw, match.end()):
            try:
                stack[-1][1] = _decode_key(token)
            except msgspec.DecodeError:
                stack[-1][1] = token[1:-1].decode("utf-8", "replace")
    return offsets


def _current(stack: list[list[Any]]) -> KeyPath:
    if not stack:
        return ()
    kind, key, path = stack[-1]
    return (*path, key) if key is not None else path


def _note_value(
    raw: bytes, after: int, stack: list[list[Any]], offsets: dict[KeyPath, int]
) -> None:
    if not stack:
        return
    space = _SPACE.match(raw, after)
    offsets[_current(stack)] = space.end() if space else after


def _is_key(raw: bytes, after: int) -> bool:
    space = _SPACE.match(raw, after)
    end = space.end() if space else after
    return raw[end : end + 1] == b":"


def lookup_offset(offsets: Mapping[KeyPath, int], path: KeyPath) -> int | None:
    """The recorded offset of *path*, else of its nearest recorded ancestor."""
    for cut in range(len(path), 0, -1):
        if path[:cut] in offsets:
            return offsets[path[:cut]]
    return None
