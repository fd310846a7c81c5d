"""What OpenCode's clients read at start-up besides configuration and providers: agents,
paths, version control, and the services Kittiwake does not run (answered truthfully
empty: no LSP, MCP, formatter, workspace or console), plus the V2 catalog routes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio
from quart import Response, request

from gateway.http import (
    Answer,
    GatewayError,
    RouteTable,
    agent_json,
    agent_v2_json,
    encode,
    request_directory,
)
from gateway.opencode._files import fuzzy_score
from gateway.opencode._v1 import located, registered_project

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = ["v1_catalog_routes"]

_LIST: Final = Answer(type=list[dict[str, Any]])
_OBJECT: Final = Answer(type=dict[str, Any])
_SKIP: Final = frozenset({".git", "node_modules", "__pycache__", ".venv"})


def _json(body: Any) -> Response:
    return Response(encode(body), content_type="application/json")


def _branch(directory: Path) -> str | None:
    """The checked-out branch named by ``.git/HEAD`` above *directory*, if any."""
    for place in (directory, *directory.parents):
        head = place / ".git" / "HEAD"
        if head.is_file():
            text = head.read_text(errors="replace").strip()
            return text.removeprefix("ref: refs/heads/") if text.startswith("ref: ") else None
    return None


def _find(
    root: Path, query: str, kind: str | None, limit: int, max_walk: int
) -> list[dict[str, str]]:
    scored: list[tuple[int, str, str]] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        rel_dir = os.path.relpath(dirpath, root)
        entries = [(d, "directory") for d in dirnames] + [(f, "file") for f in filenames]
        for name, what in entries:
            seen += 1
            if seen > max_walk:
                break
            if kind is not None and what != kind:
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            score = fuzzy_score(query, rel) if query else 0
            if score is not None:
                scored.append((score, rel, what))
        if seen > max_walk:
            break
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [{"path": rel, "type": what} for _, rel, what in scored[:limit]]


def v1_catalog_routes(table: RouteTable, gw: Gateway, *, max_walk: int) -> None:
    """Declare the start-up catalog routes."""
    rt = gw.rt

    @table.get(
        "/agent", "app.agents", "The Location's agents", answer=_LIST, query=("directory",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def agents() -> Response:
        place = await rt.execution.current_location(str(request_directory(gw)))
        return _json([agent_json(a) for _, a in sorted(place.agents.items())])

    @table.get("/path", "path.get", "Paths of this server", answer=_OBJECT, query=("directory",))
    async def path() -> Response:
        directory = request_directory(gw)
        return _json({
            "home": str(Path.home()), "state": str(rt.data_dir), "config": str(rt.data_dir),
            "worktree": str(gw.directory.resolve()), "directory": str(directory),
        })  # fmt: skip

    @table.get("/vcs", "vcs.get", "The checked-out branch", answer=_OBJECT, query=("directory",))
    async def vcs() -> Response:
        branch = await trio.to_thread.run_sync(_branch, request_directory(gw))
        return _json({} if branch is None else {"branch": branch})

    for route, op, summary in (
        ("/formatter", "formatter.status", "Formatters (none run: empty)"),
        ("/experimental/workspace", "experimental.workspace.list", "Workspaces (none)"),
        ("/experimental/workspace/status", "experimental.workspace.status",
         "Workspace status (none)"),
    ):  # fmt: skip
        table.get(route, op, summary, answer=_LIST, query=("directory",))(_constant([]))

    table.get(
        "/experimental/capabilities", "experimental.capabilities.get",
        "What this server can do", answer=_OBJECT,
    )(_constant({"backgroundSubagents": False}))  # fmt: skip
    table.get(
        "/experimental/console", "experimental.console.get", "Console state (none)",
        answer=_OBJECT,
    )(_constant({"consoleManagedProviders": [], "switchableOrgCount": 0}))  # fmt: skip

    @table.get(
        "/project/{projectID}/directories", "project.directories",
        "The project's directories", answer=_LIST, errors=("NotFoundError",),
    )  # fmt: skip
    async def directories(project_id: str) -> Response:
        project = await registered_project(gw, project_id)
        return _json([{"directory": d} for d in (project.worktree, *project.sandboxes)])

    # -- the V2 catalog ------------------------------------------------------------------

    @table.get(
        "/api/location", "v2.location.get", "The Location a request names", answer=_OBJECT,
        query=("location[directory]",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def api_location() -> Response:
        return _json((await located(gw))[1])

    @table.get(
        "/api/agent", "v2.agent.list", "The Location's agents", answer=_OBJECT,
        query=("location[directory]",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def api_agents() -> Response:
        directory, where = await located(gw)
        place = await rt.execution.current_location(str(directory))
        data = [agent_v2_json(a) for _, a in sorted(place.agents.items())]
        return _json({"location": where, "data": data})

    for route, op, what in (
        ("/api/integration", "v2.integration.list", "Integrations (none)"),
        ("/api/reference", "v2.reference.list", "References (none)"),
    ):
        table.get(route, op, what, answer=_OBJECT, query=("location[directory]",))(
            _located_empty(gw)
        )

    @table.get(
        "/api/fs/find", "v2.fs.find", "Fuzzy file and directory search", answer=_OBJECT,
        query=("location[directory]", "query", "type", "limit"),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def fs_find() -> Response:
        root, where = await located(gw)
        kind = request.args.get("type")
        if kind not in (None, "file", "directory"):
            raise GatewayError("InvalidRequestError", "type must be 'file' or 'directory'")
        try:
            limit = max(1, min(200, int(request.args.get("limit") or 50)))
        except ValueError:
            raise GatewayError("InvalidRequestError", "limit must be a number") from None
        query = request.args.get("query") or ""
        found = await trio.to_thread.run_sync(_find, root, query, kind, limit, max_walk)
        return _json({"location": where, "data": found})


def _constant(body: Any) -> Any:
    async def answer() -> Response:
        return _json(body)

    return answer


def _located_empty(gw: Gateway) -> Any:
    async def answer() -> Response:
        return _json({"location": (await located(gw))[1], "data": []})

    return answer
