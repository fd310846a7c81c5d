"""What a token of one project sees: its project's sessions, streams, files and shell, and
nothing of another project's, which is answered 404 as if it did not exist (never 403:
that would tell a guessed id exists).

A grant of every project (``*``: the password, an unscoped token) sees everything. A
scoped grant sees a session whose ``projectID`` is its project, a ``/project/{id}`` route
of its project, and a route naming a directory (``?directory=``, the
``x-opencode-directory`` header, else the server's directory: files, configuration,
session creation) only when that directory's project is its own. The session lists and
the event streams of every session (``_FILTERED``) are open to it and show only its
project's sessions (``project_filter``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from gateway.http._tokens import Grant
from gateway.http._wire import GatewayError
from runtime import InvalidSessionInputError, SessionNotFoundError

if TYPE_CHECKING:
    from actors import Runtime

__all__ = ["Scope", "project_filter"]

_UNSCOPED: Final = ("/api/health", "/global/health", "/doc", "/api/token", "/api/audit", "/web/")
"""Routes that hold nothing of a project: open to any grant its role allows."""
_FILTERED: Final = frozenset({
    "/api/session", "/session", "/api/event", "/event", "/global/event", "/project", "/api/ws",
})  # fmt: skip
"""Reads of every project that show a scoped grant only its own project's part (each
session a websocket names is checked as it names it)."""
_IN_BODY: Final = frozenset({"/api/session", "/project", "/project/init"})
"""Changes whose directory is in their body: the route checks it (``check_directory``)."""
_READS: Final = frozenset({"GET", "HEAD", "WEBSOCKET"})


def project_filter(grant: Grant | None) -> str | None:
    """The one project *grant* sees (what a list or stream of every project keeps), or
    None when it sees every project."""
    return None if grant is None or grant.project == "*" else grant.project


class Scope:
    """The project check of *rt*'s routes, remembering the project of the last *size*
    sessions it looked up (a session's project never changes)."""

    def __init__(self, rt: Runtime, *, size: int) -> None:
        self._rt = rt
        self._size = size
        self._projects: OrderedDict[str, str] = OrderedDict()

    async def check(
        self, grant: Grant, method: str, path: str, args: Mapping[str, str],
        directory: Callable[[], Path],
    ) -> None:  # fmt: skip
        """Return when *grant* may see what a request for *path* with path parameters
        *args* names; else raise what its absence raises: ``SessionNotFoundError`` for a
        session, a ``NotFoundError`` for a project or for a directory of another project.
        *directory* answers the directory the request names (it raises a 400
        ``GatewayError`` for one that does not exist). Cancellation abandons a lookup."""
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
        if (path in _FILTERED and method in _READS) or (path in _IN_BODY and method == "POST"):
            return
        if await self._rt.projects.id_of(str(directory())) != grant.project:
            raise GatewayError("NotFoundError", f"Not found: {path}", status=404)

    async def check_directory(self, grant: Grant | None, directory: str) -> None:
        """Raise a 404 ``NotFoundError`` unless *grant* sees *directory*'s project (an
        existing directory; the project is not registered by this)."""
        only = project_filter(grant)
        if only is not None and (await self._rt.projects.place(directory)).id != only:
            raise GatewayError("NotFoundError", f"Not found: {directory}", status=404)

    async def visible(self, grant: Grant | None, session_id: str) -> bool:
        """Whether *grant* sees session *session_id* (a deleted one it does not)."""
        only = project_filter(grant)
        return only is None or await self._project_of(session_id) == only

    async def sees(self, grant: Grant | None, item: object) -> bool:
        """Whether *grant* sees a hub item: a session's (its ``session_id``) when it sees
        that session, a Location's notice (its ``directory``) when that directory's
        project is its own."""
        only = project_filter(grant)
        if only is None:
            return True
        session_id = getattr(item, "session_id", None)
        if isinstance(session_id, str):
            return await self._project_of(session_id) == only
        directory = getattr(item, "directory", None)
        if not isinstance(directory, str):
            return False
        try:
            return await self._rt.projects.id_of(directory) == only
        except InvalidSessionInputError:  # the directory went away
            return False

    async def check_session(self, grant: Grant | None, session_id: str) -> None:
        """``check`` for one session (a websocket frame's)."""
        if not await self.visible(grant, session_id):
            raise SessionNotFoundError(session_id)

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
