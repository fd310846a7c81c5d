"""A session's permission requests as ``rt.sessions`` answers them: listed, replied to, and
made by a client for an action of its own (``PermissionRequests``, a part of ``Sessions``)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from msgspec import UNSET

from actors.session import SessionExecution
from actors.store import StorageActor
from runtime import IdGenerator, InvalidInputError, SessionInfo
from runtime import events as ev
from runtime.agents import PermissionAction, decide
from runtime.inbox import check_id
from storage import AskPermission, Permission, Permissions

__all__ = ["PermissionRequests"]


class PermissionRequests:
    """The permission methods of ``Sessions``, on its storage, execution, ids and clock."""

    _storage: StorageActor
    _x: SessionExecution
    _ids: IdGenerator
    _now: Callable[[], int]

    if TYPE_CHECKING:

        async def get(self, session_id: str) -> SessionInfo: ...

    async def permissions(self, session_id: str) -> builtins.list[ev.PermissionInfo]:
        """The session's permission requests, oldest first. Raises SessionNotFoundError."""
        await self.get(session_id)
        return await self._storage.read(Permissions(session_id=session_id))

    async def reply_permission(
        self, session_id: str, request_id: str, reply: Literal["once", "always", "reject"]
    ) -> None:
        """Answer a pending permission request; the waiting tool call proceeds or fails.

        Raises:
            SessionNotFoundError: no such session or request.
            PromptConflictError: the request was already answered.
            InvalidInputError: an unknown reply.
        """
        await self._x.permissions.reply(session_id, request_id, reply)
        if reply != "always":
            return
        info = await self._storage.read(Permission(request_id=request_id))
        if info is not None and not info.tool:  # a client's own request: no tool call saves it
            project = await self._project_key(session_id)
            saved = info.save if isinstance(info.save, builtins.list) else info.resources
            for pattern in saved:
                await self._x.permissions.save(project, info.permission, pattern)

    async def create_permission(
        self, session_id: str, *, action: str, resources: builtins.list[str],
        agent: str | None = None, id: str | None = None, save: builtins.list[str] | None = None,
        message_id: str | None = None, call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[str, PermissionAction]:  # fmt: skip
        """Evaluate *action* on *resources* as a tool call would be, under *agent* (else the
        session's), and record a pending request when that says ``ask``; return the
        request's id and the effect.

        ``allow`` and ``deny`` record nothing. A pending request is listed and answered
        like a tool call's (``reply_permission``); answered ``always``, it saves *save*
        (else the resources) as approvals of the project. An exact retry (same id,
        session, action and resources) returns the same id.

        Raises:
            SessionNotFoundError: no such session.
            InvalidInputError: an empty action or a malformed id.
            PromptConflictError: the id names another request.
        """
        if not action:
            raise InvalidInputError("action must not be empty")
        if id is not None:
            check_id("per", id)
        info = await self.get(session_id)
        location = await self._x.location(info.location.directory)
        name = agent if agent is not None else info.agent if isinstance(info.agent, str) else None
        resolved = location.agent(name)
        effect = await decide(
            resolved.permission, action, resources, approvals=self._x.permissions,
            project=location.registry.env.project_key,
        )  # fmt: skip
        request_id = id or self._ids.new("per")
        if effect != "ask":
            return request_id, effect
        asked = ev.PermissionAsked(
            timestamp=self._now(), session_id=session_id, request_id=request_id,
            agent=resolved.name, tool="", call_id=call_id or "",
            permission=action, resources=resources,
            save=save if save is not None else UNSET,
            message_id=message_id if message_id is not None else UNSET,
            metadata=metadata if metadata is not None else UNSET,
        )  # fmt: skip
        await self._storage.write(AskPermission(asked=asked))
        return request_id, "ask"

    async def _project_key(self, session_id: str) -> str:
        info = await self.get(session_id)
        return (await self._x.location(info.location.directory)).registry.env.project_key
