"""The file routes: fuzzy file search, directory listings, file contents and git status, of
the project directory or a session's directory (never outside the gateway's directory)."""

from __future__ import annotations

import base64
import mimetypes
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio
from quart import Response, request

from gateway.http import Answer, GatewayError, RouteTable, encode
from runtime import SessionInfo

if TYPE_CHECKING:
    from gateway.http import Gateway
    from gateway.opencode._project import FileLimits

__all__ = ["file_routes", "fuzzy_score", "inside", "parse_porcelain"]

_SKIP_DIRS: Final = frozenset({".git", "node_modules", "__pycache__", ".venv", ".hg", ".svn"})


def _json(body: Any) -> Response:
    return Response(encode(body), content_type="application/json")


def inside(root: Path, raw: str) -> Path:
    """*raw* (relative to *root*, or absolute) resolved; 400 when it leaves *root*."""
    if "\x00" in raw:
        raise GatewayError("InvalidRequestError", "Paths cannot contain NUL")
    target = (root / raw).resolve()
    if target != root and root not in target.parents:
        raise GatewayError("InvalidRequestError", f"Path is outside the project: {raw}")
    return target


def fuzzy_score(query: str, candidate: str) -> int | None:
    """A score for *query* as a case-insensitive subsequence of *candidate*; None if absent.

    Higher is better: consecutive matches and matches in the file name count more,
    longer candidates a little less.
    """
    q = query.lower()
    c = candidate.lower()
    base = c.rfind("/") + 1
    score = 0
    pos = 0
    last = -2
    for ch in q:
        found = c.find(ch, pos)
        if found < 0:
            return None
        score += 1 + (3 if found == last + 1 else 0) + (2 if found >= base else 0)
        last = found
        pos = found + 1
    if q in c[base:]:
        score += 10 * len(q)
    return score * 1000 - len(c)


def _find(
    root: Path, query: str, *, kind: str | None, limit: int, max_walk: int
) -> list[str]:  # fmt: skip
    scored: list[tuple[int, str]] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        rel_dir = os.path.relpath(dirpath, root)
        names: list[tuple[str, bool]] = []
        if kind != "file":
            names += [(d, True) for d in dirnames]
        if kind != "directory":
            names += [(f, False) for f in filenames]
        for name, is_dir in names:
            seen += 1
            if seen > max_walk:
                break
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            rel = rel + "/" if is_dir else rel
            score = fuzzy_score(query, rel) if query else 0
            if score is not None:
                scored.append((score, rel))
        if seen > max_walk:
            break
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [rel for _, rel in scored[:limit]]


def _list_dir(root: Path, target: Path, max_list: int) -> list[dict[str, Any]]:
    if not target.is_dir():
        raise GatewayError("InvalidRequestError", "Not a directory")
    nodes = []
    for entry in sorted(os.scandir(target), key=lambda e: (not e.is_dir(), e.name))[:max_list]:
        absolute = Path(entry.path)
        nodes.append(
            {"name": entry.name, "path": str(absolute.relative_to(root)),
             "absolute": str(absolute), "type": "directory" if entry.is_dir() else "file",
             "ignored": entry.name in _SKIP_DIRS}
        )  # fmt: skip
    return nodes


def _read_file(target: Path, max_read: int) -> dict[str, Any]:
    if not target.is_file():
        raise GatewayError("InvalidRequestError", "Not a file")
    if target.stat().st_size > max_read:
        raise GatewayError("InvalidRequestError", f"File is larger than {max_read} bytes")
    data = target.read_bytes()
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        return {"type": "text", "content": data.decode()}
    except UnicodeDecodeError:
        mime = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        return {
            "type": "binary", "content": base64.b64encode(data).decode(),
            "encoding": "base64", "mimeType": mime,
        }  # fmt: skip


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0  # "-" for binary files


def parse_porcelain(status: str, numstat: str) -> list[dict[str, Any]]:
    """OpenCode's ``File[]`` from ``git status --porcelain -z`` and ``git diff --numstat``."""
    counts: dict[str, tuple[int, int]] = {}
    for line in numstat.splitlines():
        fields = line.split("\t", 2)
        if len(fields) == 3:
            added, removed, path = fields
            counts[path] = (_int(added), _int(removed))
    files = []
    entries = status.split("\x00")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            i += 1  # the next entry is the rename source
        if code == "??" or "A" in code:
            kind = "added"
        elif "D" in code:
            kind = "deleted"
        else:
            kind = "modified"
        plus, minus = counts.get(path, (0, 0))
        files.append({"path": path, "added": plus, "removed": minus, "status": kind})
    return files


async def _git(root: Path, args: Sequence[str], limit: float) -> str | None:
    """Run git in *root*; None when *root* is no work tree. Cancellation kills git."""
    try:
        with trio.fail_after(limit):
            done = await trio.run_process(
                ["git", *args], cwd=root, capture_stdout=True, capture_stderr=True, check=False,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
            )  # fmt: skip
    except trio.TooSlowError:
        raise GatewayError("ServiceUnavailableError", "git did not answer in time") from None
    except FileNotFoundError:
        raise GatewayError("ServiceUnavailableError", "git is not installed") from None
    if done.returncode != 0:
        return None
    return bytes(done.stdout).decode(errors="replace")


def file_routes(
    table: RouteTable, gw: Gateway, limits: FileLimits, root_arg: Callable[[], Awaitable[Path]],
    check_project: Callable[[str], Awaitable[object]],
    session_of: Callable[[str, str], Awaitable[SessionInfo]],
) -> None:  # fmt: skip
    """Declare the file routes on *table*: *root_arg* gives the directory a request names,
    *check_project* and *session_of* answer 404 for an unknown project or session."""

    async def find_in(root: Path) -> Response:
        query = request.args.get("query")
        if query is None:
            raise GatewayError("InvalidRequestError", "query is required")
        kind = request.args.get("type")
        if kind not in (None, "file", "directory"):
            raise GatewayError("InvalidRequestError", "type must be 'file' or 'directory'")
        if request.args.get("dirs") == "false" and kind is None:
            kind = "file"
        limit = _bounded_int("limit", 50, 1, 200)
        found = await trio.to_thread.run_sync(
            lambda: _find(root, query, kind=kind, limit=limit, max_walk=limits.max_walk)
        )
        return _json(found)

    async def list_in(root: Path) -> Response:
        target = inside(root, _required("path"))
        return _json(await trio.to_thread.run_sync(_list_dir, root, target, limits.max_list))

    async def content_in(root: Path) -> Response:
        target = inside(root, _required("path"))
        return _json(await trio.to_thread.run_sync(_read_file, target, limits.max_read))

    async def status_in(root: Path) -> Response:
        status = await _git(root, ["status", "--porcelain=v1", "-z"], limits.git_timeout)
        if status is None:
            return _json([])
        numstat = await _git(root, ["diff", "--numstat", "HEAD"], limits.git_timeout)
        return _json(parse_porcelain(status, numstat or ""))

    async def session_root(project_id: str, session_id: str) -> Path:
        info = await session_of(project_id, session_id)
        directory = Path(info.location.directory)
        if not await trio.to_thread.run_sync(directory.is_dir):
            raise GatewayError("InvalidRequestError", "The session's directory does not exist")
        return directory

    @table.get(
        "/find/file", "find.files",
        "Fuzzy file name search", answer=Answer(type=list[str]),
        query=("directory", "query", "type", "dirs", "limit"), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def find_file() -> Response:
        return await find_in(await root_arg())

    @table.get(
        "/project/{projectID}/find/file", "project.find.files",
        "Fuzzy file name search", answer=Answer(type=list[str]),
        query=("directory", "query", "type", "dirs", "limit"),
        errors=("NotFoundError", "InvalidRequestError"),
    )  # fmt: skip
    async def project_find_file(project_id: str) -> Response:
        await check_project(project_id)
        return await find_in(await root_arg())

    @table.get(
        "/file", "file.list",
        "List a directory", answer=Answer(type=list[dict[str, Any]]), query=("directory", "path"),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def list_files() -> Response:
        return await list_in(await root_arg())

    @table.get(
        "/file/content", "file.read",
        "A file's content", answer=Answer(type=dict[str, Any]), query=("directory", "path"),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def file_content() -> Response:
        return await content_in(await root_arg())

    @table.get(
        "/file/status", "file.status",
        "git status", answer=Answer(type=list[dict[str, Any]]), query=("directory",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def file_status() -> Response:
        return await status_in(await root_arg())

    @table.get(
        "/project/{projectID}/session/{sessionID}/find/file", "project.session.find.files",
        "Fuzzy file name search in the session's directory", answer=Answer(type=list[str]),
        query=("query", "type", "dirs", "limit"), errors=("NotFoundError", "InvalidRequestError"),
    )  # fmt: skip
    async def session_find_file(project_id: str, session_id: str) -> Response:
        return await find_in(await session_root(project_id, session_id))

    @table.get(
        "/project/{projectID}/session/{sessionID}/file", "project.session.file.list",
        "List a directory of the session's", answer=Answer(type=list[dict[str, Any]]),
        query=("path",), errors=("NotFoundError", "InvalidRequestError"),
    )  # fmt: skip
    async def session_files(project_id: str, session_id: str) -> Response:
        return await list_in(await session_root(project_id, session_id))

    @table.get(
        "/project/{projectID}/session/{sessionID}/file/content", "project.session.file.read",
        "A file's content", answer=Answer(type=dict[str, Any]), query=("path",),
        errors=("NotFoundError", "InvalidRequestError"),
    )  # fmt: skip
    async def session_file_content(project_id: str, session_id: str) -> Response:
        return await content_in(await session_root(project_id, session_id))

    @table.get(
        "/project/{projectID}/session/{sessionID}/file/status", "project.session.file.status",
        "git status of the session's directory", answer=Answer(type=list[dict[str, Any]]),
        errors=("NotFoundError", "InvalidRequestError"),
    )  # fmt: skip
    async def session_file_status(project_id: str, session_id: str) -> Response:
        return await status_in(await session_root(project_id, session_id))


def _required(name: str) -> str:
    value = request.args.get(name)
    if value is None:
        raise GatewayError("InvalidRequestError", f"{name} is required")
    return value


def _bounded_int(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise GatewayError("InvalidRequestError", f"{name} must be an integer") from None
    if not low <= value <= high:
        raise GatewayError("InvalidRequestError", f"{name} must be within {low}..{high}")
    return value
