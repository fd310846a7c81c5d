"""What a token of one project sees: its project's sessions, streams, files and shell, and
nothing of another project's, which is answered 404 as if it did not exist (never 403:
that would tell a guessed id exists).

A grant of every project (``*``: the password, an unscoped token) sees everything. A
scoped grant sees a session whose ``projectID`` is its project, a ``/project/{id}`` route
of its project, and the routes of the runtime's own project (events, files, shell, lists,
creation) only when that project is its own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from gateway.http._tokens import Grant
from gateway.http._wire import GatewayError
from runtime import SessionNotFoundError

if TYPE_CHECKING:
    from actors import Runtime

__all__ = ["Scope"]

_UNSCOPED: Final = ("/api/health", "/global/health", "/doc", "/api/token", "/api/audit", "/web/")
"""Routes that hold nothing of a project: open to any grant its role allows."""


class Scope:
    """The project check of *rt*'s routes, remembering the project of the last *size*
    sessions it looked up (a session's project never changes)."""

    def __init__(self, rt: Runtime, *, size: int) -> None:
        self._rt = rt
        self._size = size
        self._projects: OrderedDict[str, str] = OrderedDict()

    async def check(self, grant: Grant, path: str, args: Mapping[str, str]) -> None:
        """Return when *grant* may see what a request for *path* with path parameters
        *args* names; else raise what its absence raises: ``SessionNotFoundError`` for a
        session, a ``NotFoundError`` for a project or for the runtime's project routes.
        Cancellation abandons a session lookup."""
        if grant.project == "*":
            return
        session_id = args.get("session_id")
        if session_id is not None:
            if await self._project_of(session_id) != grant.project:
                raise SessionNotFoundError(session_id)
            return
        project_id = args.get("project_id")
        if project_id is not None:
            if project_id != grant.project:
                raise GatewayError(
                    "NotFoundError", f"Project not found: {project_id}", status=404,
                    projectID=project_id,
                )  # fmt: skip
            return
        if path == "/" or path.startswith(_UNSCOPED):
            return
        if str(self._rt.sessions.project_id) != grant.project:
            raise GatewayError("NotFoundError", f"Not found: {path}", status=404)

    async def check_session(self, grant: Grant | None, session_id: str) -> None:
        """``check`` for one session (a websocket frame's)."""
        if grant is not None:
            await self.check(grant, "", {"session_id": session_id})

    async def _project_of(self, session_id: str) -> str | None:
        found = self._projects.get(session_id)
        if found is None:
            try:
                info = await self._rt.sessions.get(session_id)
            except SessionNotFoundError:
                return None
            found = self._projects[session_id] = info.project_id
            while len(self._projects) > self._size:
                self._projects.popitem(last=False)
        return found
