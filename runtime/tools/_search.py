"""The ``glob`` and ``grep`` tools: walks inside authority that honour ``.gitignore``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Final

import msgspec

from runtime.llm import TextPart
from runtime.tools._authority import ResolvedPath, is_within, resolve_path
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._read import is_binary
from runtime.tools._tool import Tool

if TYPE_CHECKING:
    import pathspec

__all__ = ["GlobInput", "GrepInput", "SearchLimits", "glob_regex", "glob_tool", "grep_tool"]

_ALWAYS_SKIPPED: Final = frozenset({".git"})


class GlobInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``glob``: a pattern (``**`` crosses directories, ``{a,b}`` alternatives) under
    *path*."""

    pattern: str
    path: str = "."


class GrepInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``grep``: a Python regular expression, where to look, which files."""

    pattern: str
    path: str = "."
    include: str | None = None


class SearchLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Result caps of ``glob`` and ``grep``."""

    max_results: int = 100
    max_line_chars: int = 2000
    max_file_bytes: int = 10 * 1024 * 1024


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob: ``**/`` any directories, ``*`` and ``?`` within one name, ``[...]``
    classes, ``{a,b}`` alternatives (nested too; a brace without its partner and a comma
    outside braces are literal). A pattern without ``/`` matches names at any depth."""
    if "/" not in pattern:
        pattern = "**/" + pattern
    tokens: list[str] = []
    i = 0
    while i < len(pattern):
        token, i = _glob_token(pattern, i)
        tokens.append(token)
    # Pair the braces innermost first; a comma separates the alternatives of the innermost
    # brace open where it stands, when that brace is closed.
    opened: list[int] = []
    owner: dict[int, int] = {}
    paired: set[int] = set()
    for n, token in enumerate(tokens):
        if token == _OPEN:
            opened.append(n)
        elif token == _COMMA and opened:
            owner[n] = opened[-1]
        elif token == _CLOSE and opened:
            paired.update((opened.pop(), n))
    out = []
    for n, token in enumerate(tokens):
        if token in (_OPEN, _CLOSE):
            out.append(("(?:" if token == _OPEN else ")") if n in paired else re.escape(token))
        elif token == _COMMA:
            out.append("|" if owner.get(n) in paired else ",")
        else:
            out.append(token)
    return re.compile("".join(out) + r"\Z", re.DOTALL)


_OPEN: Final = "{"
_CLOSE: Final = "}"
_COMMA: Final = ","


def _glob_token(pattern: str, i: int) -> tuple[str, int]:
    """The regex of the glob token at *i* and the index after it; braces and commas come
    back as themselves, for ``glob_regex`` to pair."""
    if pattern.startswith("**/", i):
        return "(?:.*/)?", i + 3
    if pattern.startswith("**", i):
        return ".*", i + 2
    char = pattern[i]
    if char == "*":
        return "[^/]*", i + 1
    if char == "?":
        return "[^/]", i + 1
    if char in (_OPEN, _CLOSE, _COMMA):
        return char, i + 1
    end = pattern.find("]", i + 2)
    if char == "[" and end != -1:
        body = pattern[i + 1 : end].replace("\\", "\\\\")
        return "[" + ("^" + body[1:] if body.startswith("!") else body) + "]", end + 1
    return re.escape(char), i + 1


def _check_pattern(pattern: str) -> None:
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError(f"Glob pattern leaves the search directory: {pattern}")


class _Ignores:
    """``.gitignore`` files met during a walk, each applying below its directory."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.specs: list[tuple[str, pathspec.PathSpec]] = []

    def load(self, directory: str) -> None:
        path = os.path.join(directory, ".gitignore")
        if self.enabled and os.path.isfile(path):
            import pathspec  # about 40 ms of start-up otherwise; loaded by the first walk

            with open(path, encoding="utf-8", errors="replace") as handle:
                self.specs.append((directory, pathspec.GitIgnoreSpec.from_lines(handle)))

    def ignored(self, path: str, is_dir: bool) -> bool:
        if os.path.basename(path) in _ALWAYS_SKIPPED:
            return True
        for base, spec in self.specs:
            if is_within(path, base) and path != base:
                rel = os.path.relpath(path, base) + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
        return False


def walk_files(root: str, location: str, *, managed: bool) -> Iterator[str]:
    """Absolute paths of files under *root*, sorted per directory, skipping ignored entries,
    symlinked directories, and symlinked files that lead outside *location*."""
    ignores = _Ignores(enabled=not managed)
    if not managed:
        for parent in _ancestors(root, location):
            ignores.load(parent)
    for directory, dirs, files in os.walk(root):
        ignores.load(directory)
        dirs[:] = sorted(
            d for d in dirs if not ignores.ignored(os.path.join(directory, d), is_dir=True)
        )
        for name in sorted(files):
            path = os.path.join(directory, name)
            if not ignores.ignored(path, is_dir=False) and _inside(path, location, root):
                yield path


def _ancestors(root: str, location: str) -> list[str]:
    chain, current = [], os.path.dirname(root)
    while is_within(current, location) and current != root:
        chain.append(current)
        if current == location:
            break
        current = os.path.dirname(current)
    return chain[::-1]


def _inside(path: str, location: str, root: str) -> bool:
    if not os.path.islink(path):
        return True
    real = os.path.realpath(path)
    return is_within(real, location) or is_within(real, root)


def _base(env: ToolEnvironment, path: str) -> ResolvedPath:
    base = resolve_path(env, path, allow_managed=True)
    if not os.path.isdir(base.absolute):
        raise ToolError(f"Not a directory: {path}")
    return base


def _shown(base: ResolvedPath, env: ToolEnvironment, path: str) -> str:
    if base.managed:
        return path
    return os.path.relpath(path, os.path.realpath(env.directory))


GLOB_DESCRIPTION: Final = (
    "Find files by glob pattern (e.g. '**/*.py', 'src/*.ts', '*.{ts,tsx}'; a pattern without '/' "
    "matches at any depth) under a directory relative to the project directory. Honours "
    ".gitignore."
)
GREP_DESCRIPTION: Final = (
    "Search file contents with a regular expression under a directory relative to the project "
    "directory; include limits the files by glob. Honours .gitignore; binary files are skipped."
)


def glob_tool(limits: SearchLimits | None = None) -> Tool[GlobInput]:
    """The ``glob`` tool (permission ``glob``, resource: the pattern)."""
    bounds = limits or SearchLimits()

    async def handler(data: GlobInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        _check_pattern(data.pattern)
        base = _base(env, data.path)
        return await run_blocking(env, lambda: _glob(env, base, data, bounds))

    return Tool(
        name="glob",
        description=GLOB_DESCRIPTION,
        input_type=GlobInput,
        handler=handler,
        permission="glob",
        resources=lambda data, env: [_base(env, data.path).resource + ":" + data.pattern],
    )


def _glob(
    env: ToolEnvironment, base: ResolvedPath, data: GlobInput, bounds: SearchLimits
) -> ToolOutput:
    regex = glob_regex(data.pattern)
    location = os.path.realpath(env.directory)
    found: list[str] = []
    for path in walk_files(base.absolute, location, managed=base.managed):
        if regex.match(os.path.relpath(path, base.absolute)):
            found.append(_shown(base, env, path))
            if len(found) > bounds.max_results:
                break
    return _listing(found, bounds.max_results, "files", "No files found")


def _listing(found: list[str], cap: int, unit: str, empty: str) -> ToolOutput:
    truncated = len(found) > cap
    shown = found[:cap]
    text = "\n".join(shown) if shown else empty
    if truncated:
        text += f"\n\n(Results truncated to the first {cap} {unit}; narrow the search.)"
    return ToolOutput(
        content=[TextPart(text=text)], structured={"matches": shown, "truncated": truncated}
    )


def grep_tool(limits: SearchLimits | None = None) -> Tool[GrepInput]:
    """The ``grep`` tool (permission ``grep``, resource: the pattern)."""
    bounds = limits or SearchLimits()

    async def handler(data: GrepInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        if data.include is not None:
            _check_pattern(data.include)
        try:
            regex = re.compile(data.pattern)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression: {exc}") from None
        base = _base(env, data.path)
        return await run_blocking(env, lambda: _grep(env, base, regex, data, bounds))

    return Tool(
        name="grep",
        description=GREP_DESCRIPTION,
        input_type=GrepInput,
        handler=handler,
        permission="grep",
        resources=lambda data, env: [_base(env, data.path).resource + ":" + data.pattern],
    )


def _grep(
    env: ToolEnvironment,
    base: ResolvedPath,
    regex: re.Pattern[str],
    data: GrepInput,
    bounds: SearchLimits,
) -> ToolOutput:
    include = glob_regex(data.include) if data.include else None
    location = os.path.realpath(env.directory)
    found: list[str] = []
    for path in walk_files(base.absolute, location, managed=base.managed):
        if include and not include.match(os.path.relpath(path, base.absolute)):
            continue
        matches = _grep_file(path, _shown(base, env, path), regex, bounds)
        found.extend(islice(matches, bounds.max_results + 1 - len(found)))
        if len(found) > bounds.max_results:
            break
    return _listing(found, bounds.max_results, "matches", "No matches found")


def _grep_file(
    path: str, shown: str, regex: re.Pattern[str], bounds: SearchLimits
) -> Iterator[str]:
    try:
        if os.path.getsize(path) > bounds.max_file_bytes:
            return
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return
    if is_binary(data[:8192]):
        return
    for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
        if regex.search(line):
            yield f"{shown}:{number}: {line[: bounds.max_line_chars]}"
