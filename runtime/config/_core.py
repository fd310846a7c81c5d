"""Pure configuration steps: substitute, parse, validate and merge source documents.

Nothing here touches the filesystem or the process environment: ``{file:}`` contents come
through a ``read_file`` callable and ``{env:}`` values from a mapping, so each step is a
function of its inputs (``runtime.config._load`` is the shell that reads files).
"""

from __future__ import annotations

import functools
import os
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Final, Union, get_args, get_origin

import msgspec

from runtime.config._jsonc import (
    ConfigError,
    KeyPath,
    lookup_offset,
    parse_jsonc,
    position,
    render_path,
)
from runtime.config._schema import OPEN_SECTIONS, Config

__all__ = [
    "ConfigDiagnostic",
    "Document",
    "merge_documents",
    "parse_document",
    "substitute",
    "validate_document",
]

_REFERENCE: Final = re.compile(r"\{(env|file):([^}]+)\}")
_AT: Final = re.compile(r" - at `(.*)`$")
_SEGMENT: Final = re.compile(r"\.([^.\[]+)|\[(\.\.\.|\d+)\]")
_PLAIN: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_CONCATENATED: Final = frozenset({"instructions", "plugin"})
"""Top-level lists that merging concatenates (without repeats) instead of replacing."""


class ConfigDiagnostic(msgspec.Struct, frozen=True, kw_only=True):
    """Something in a source that was not used (an unknown or unsupported key)."""

    source: str
    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}"


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """One parsed, substituted and validated source, lowest precedence first in a list.

    ``data`` holds the keys Kittiwake reads (unknown ones removed and reported in
    ``diagnostics``); ``references`` lists the files ``{file:}`` read.
    """

    source: str
    data: dict[str, Any]
    diagnostics: list[ConfigDiagnostic] = []
    references: list[str] = []


def substitute(
    text: str, *, env: Mapping[str, str], base_dir: str | None, home: str,
    read_file: Callable[[str], str], source: str,
) -> tuple[str, list[tuple[int, int, int]], list[str]]:  # fmt: skip
    """Replace ``{env:NAME}`` by the variable (empty when unset) and ``{file:path}`` by the
    file's trimmed content, JSON-escaped, as OpenCode does; references on a line that
    starts with ``//`` are left alone. A relative path is relative to *base_dir* (the
    source's folder; the working directory for inline content), ``~/`` is *home*.

    Returns the text, the replacements as ``(start, old_length, new_length)`` in the
    new text, and the files read.

    Raises:
        ConfigError: a referenced file cannot be read.
    """
    edits: list[tuple[int, int, int]] = []
    files: list[str] = []
    out: list[str] = []
    last = shift = 0
    for match in _REFERENCE.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start : match.start()].lstrip().startswith("//"):
            continue
        kind, name = match.groups()
        if kind == "env":
            value = env.get(name, "")
        else:
            path = _resolve(name.strip(), base_dir, home)
            try:
                content = read_file(path)
            except (OSError, UnicodeDecodeError) as exc:
                line, column = position(text.encode(), len(text[: match.start()].encode()))
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConfigError(
                    f"bad file reference {match.group()}: {path}: {reason}",
                    source=source, line=line, column=column,
                ) from None  # fmt: skip
            files.append(path)
            value = msgspec.json.encode(content.strip()).decode()[1:-1]
        out.append(text[last : match.start()])
        out.append(value)
        edits.append((match.start() + shift, match.end() - match.start(), len(value)))
        shift += len(value) - (match.end() - match.start())
        last = match.end()
    out.append(text[last:])
    return "".join(out), edits, files


def _resolve(path: str, base_dir: str | None, home: str) -> str:
    if path.startswith("~/"):
        return os.path.join(home, path[2:])
    if os.path.isabs(path) or base_dir is None:
        return path
    return os.path.normpath(os.path.join(base_dir, path))


def parse_document(
    text: str, *, source: str, env: Mapping[str, str], base_dir: str | None, home: str,
    read_file: Callable[[str], str],
) -> Document:  # fmt: skip
    """Substitute, parse (JSONC) and validate one source.

    Raises:
        ConfigError: a syntax error, a wrong type or a bad ``{file:}`` reference, naming
            *source*, the line and column in the original text, and the key path.
    """
    new, edits, files = substitute(
        text, env=env, base_dir=base_dir, home=home, read_file=read_file, source=source
    )
    try:
        data, offsets = parse_jsonc(new, source=source)
    except ConfigError as exc:
        raise _moved(exc, text, new, edits) from None
    if not isinstance(data, dict):
        raise ConfigError("a configuration must be a JSON object", source=source, line=1, column=1)
    try:
        return validate_document(
            data, source=source, offsets=offsets, references=files, text=new.encode()
        )
    except ConfigError as exc:
        raise _moved(exc, text, new, edits) from None


def _moved(exc: ConfigError, text: str, new: str, edits: list[tuple[int, int, int]]) -> ConfigError:
    """*exc* with its line and column mapped from the substituted text back to *text*."""
    if not edits or exc.line is None or exc.column is None:
        return exc
    lines = new.split("\n")
    offset = sum(len(line) + 1 for line in lines[: exc.line - 1]) + exc.column - 1
    original = offset
    for start, old, length in edits:
        if start + length <= offset:
            original -= length - old
        elif start <= offset:
            original = original - (offset - start)
    prefix = text[:original]
    return ConfigError(
        exc.message, source=exc.source, line=prefix.count("\n") + 1,
        column=original - (prefix.rfind("\n") + 1) + 1, path=exc.path,
    )  # fmt: skip


def validate_document(
    data: dict[str, Any], *, source: str, offsets: Mapping[KeyPath, int] | None = None,
    references: Sequence[str] = (), text: bytes | None = None,
) -> Document:  # fmt: skip
    """Check *data* against :class:`Config`; unknown keys become diagnostics and are dropped.

    Raises:
        ConfigError: a value of the wrong type, naming its key path (and line and
            column when *offsets* and the text are known).
    """
    try:
        msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        message = str(exc)
        found = _AT.search(message)
        path = _locate(data, Config, found.group(1)) if found else ()
        message = _AT.sub("", message).replace(" | null", "")
        line = column = None
        at = lookup_offset(offsets if offsets is not None else {}, path)
        if at is not None and text is not None:
            line, column = position(text, at)
        raise ConfigError(message, source=source, line=line, column=column, path=path) from None
    walk = _Walk(source, offsets if offsets is not None else {}, text)
    kept = walk.prune(data, Config, ())
    return Document(
        source=source, data=kept, diagnostics=walk.diagnostics, references=list(references)
    )


# -- type walking -------------------------------------------------------------------------


@functools.cache
def _members(tp: Any) -> tuple[Any, ...]:
    """The alternatives of *tp* with ``Annotated`` and ``None`` taken off."""
    if get_origin(tp) is Annotated:
        return _members(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        return tuple(m for arg in get_args(tp) for m in _members(arg) if m is not type(None))
    return (tp,)


def _container(tp: Any, value: Any) -> Any:
    """The member of *tp* that holds *value*: a Struct or dict for an object, a list for
    an array; None when *value* is a scalar."""
    for member in _members(tp):
        if isinstance(value, dict) and (
            get_origin(member) is dict
            or (isinstance(member, type) and issubclass(member, msgspec.Struct))
        ):
            return member
        if isinstance(value, list) and get_origin(member) is list:
            return member
    return None


@functools.cache
def _fields(struct: type[msgspec.Struct]) -> dict[str, Any]:
    return {f.encode_name: f.type for f in msgspec.structs.fields(struct)}


class _Walk:
    """Drops the keys :class:`Config` does not know, noting a diagnostic for each."""

    def __init__(self, source: str, offsets: Mapping[KeyPath, int], text: bytes | None) -> None:
        self.source = source
        self.offsets = offsets
        self.text = text
        self.diagnostics: list[ConfigDiagnostic] = []

    def prune(self, value: Any, tp: Any, path: KeyPath) -> Any:
        member = _container(tp, value)
        if member is None:
            return value
        if get_origin(member) is list:
            (item,) = get_args(member)
            return [self.prune(v, item, (*path, i)) for i, v in enumerate(value)]
        if get_origin(member) is dict:
            inner = get_args(member)[1]
            return {k: self.prune(v, inner, (*path, k)) for k, v in value.items()}
        fields = _fields(member)
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if key in fields:
                kept[key] = self.prune(item, fields[key], (*path, key))
                continue
            if member in OPEN_SECTIONS:
                kept[key] = item
            if OPEN_SECTIONS.get(member, True):
                self._unknown((*path, key), member in OPEN_SECTIONS)
        return kept

    def _unknown(self, path: KeyPath, kept: bool) -> None:
        message = (
            "kept but not used by Kittiwake" if kept else "not supported by Kittiwake; ignored"
        )
        at = self.offsets.get(path)
        line, column = (None, None)
        if at is not None and self.text is not None:
            line, column = position(self.text, at)
        self.diagnostics.append(
            ConfigDiagnostic(
                source=self.source,
                path=render_path(path),
                message=message,
                line=line,
                column=column,
            )  # fmt: skip
        )


def _locate(data: Any, tp: Any, at: str) -> KeyPath:
    """The key path msgspec's ``$.a[...].b`` points at, with the ``[...]`` (a mapping
    key msgspec leaves out) filled in by finding the entry that fails to convert."""
    path: list[str | int] = []
    value = data
    for name, index in (m.groups() for m in _SEGMENT.finditer(at.removeprefix("$"))):
        member = _container(tp, value)
        if member is None:
            break
        if name is not None and get_origin(member) not in (dict, list):
            tp = _fields(member).get(name)
            value = value.get(name) if isinstance(value, dict) else None
            path.append(name)
        elif index == "..." and get_origin(member) is dict:
            tp = get_args(member)[1]
            key = next((k for k, v in value.items() if not _converts(v, tp)), None)
            if key is None:
                break
            path.append(key)
            value = value[key]
        elif index is not None and index.isdigit() and get_origin(member) is list:
            tp = get_args(member)[0]
            value = value[int(index)] if int(index) < len(value) else None
            path.append(int(index))
        else:
            break
    return tuple(path)


def _converts(value: Any, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


# -- merging ------------------------------------------------------------------------------


def merge_documents(documents: Sequence[Document]) -> tuple[dict[str, Any], dict[str, str]]:
    """Deep-merge *documents* (lowest precedence first): objects merge key by key, a later
    scalar or list replaces, ``instructions`` lists are concatenated without repeats.

    Returns the merged data and, for each leaf key path (``provider.local.options.baseURL``),
    the source it came from.
    """
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for document in documents:
        merged = _merge(merged, document.data, ())
        _record(document.data, "", document.source, origins)
    present: dict[str, str] = {}
    _record(merged, "", "", present)
    return merged, {path: origins[path] for path in present}


def _record(value: Any, prefix: str, source: str, into: dict[str, str]) -> None:
    """Set *source* as the origin of every leaf under *value* (paths as ``render_path``)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            if _PLAIN.fullmatch(key):
                path = f"{prefix}.{key}" if prefix else key
            else:
                path = prefix + render_path((key,)) if prefix else render_path((key,))
            _record(item, path, source, into)
    elif prefix:  # an empty document has no leaves
        into[prefix] = source


def _merge(base: dict[str, Any], top: Mapping[str, Any], path: KeyPath) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = _merge(old, value, (*path, key))
        elif (
            not path and key in _CONCATENATED and isinstance(value, list) and isinstance(old, list)
        ):
            out[key] = [*old, *(v for v in value if v not in old)]
        else:
            out[key] = value
    return out
