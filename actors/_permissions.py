"""Durable permission requests and saved approvals, behind the tool registry's protocols.

``ask`` records ``permission.v2.asked`` durably, then waits for a client's reply
(``reply``), which is recorded as ``permission.v2.replied``. A request whose call
is cancelled while waiting is recorded as rejected: the call never ran.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

import trio

from actors._storage import StorageActor
from runtime import InvalidInputError, PromptConflictError, SessionNotFoundError
from runtime import events as ev
from runtime.agents import PermissionReply, PermissionRequest
from runtime.telemetry import span
from storage import Append, ApprovalRow, IsApproved, ReplyPermission, SaveApproval

__all__ = ["DurablePermissions"]

_CANCEL_GRACE: Final = 5.0
_REPLIES: Final = ("once", "always", "reject")


class DurablePermissions:
    """The runtime's ``PermissionGate`` and ``SavedApprovals``, backed by the event store."""

    def __init__(self, storage: StorageActor, now_ms: Callable[[], int]) -> None:
        self._storage = storage
        self._now = now_ms
        self._waiting: dict[str, trio.Event] = {}
        self._replies: dict[str, PermissionReply] = {}

    async def ask(self, request: PermissionRequest) -> PermissionReply:
        """Record *request* and wait for its reply.

        Cancellation records the request as rejected (shielded, bounded; unless a reply
        was recorded first) and re-raises.
        """
        asked = ev.PermissionAsked(
            timestamp=self._now(), session_id=request.session_id, request_id=request.id,
            agent=request.agent, tool=request.tool, call_id=request.call_id,
            permission=request.permission, resources=request.resources,
        )  # fmt: skip
        done = self._waiting.setdefault(request.id, trio.Event())
        await self._storage.write(Append(session_id=request.session_id, events=[asked]))
        attributes = {
            "session.id": request.session_id, "kittiwake.permission": request.permission,
            "gen_ai.tool.name": request.tool,
        }  # fmt: skip
        try:
            with span("permission.wait", attributes):
                await done.wait()
        except BaseException:
            # However the wait ends without a reply, the call does not run. A reply that
            # raced the cancellation stands: the cancellation still propagates.
            with trio.move_on_after(_CANCEL_GRACE, shield=True):
                with contextlib.suppress(PromptConflictError, SessionNotFoundError):
                    await self._record(request.session_id, request.id, "reject")
            self._replies.pop(request.id, None)
            raise
        finally:
            self._waiting.pop(request.id, None)
        return self._replies.pop(request.id)

    async def reply(self, session_id: str, request_id: str, reply: PermissionReply) -> None:
        """Resolve a pending request with once / always / reject.

        Raises:
            InvalidInputError: an unknown reply.
            SessionNotFoundError: no such request in this session.
            PromptConflictError: the request was already answered.
        """
        if reply not in _REPLIES:
            raise InvalidInputError(f"Unknown reply {reply!r}; use once, always or reject")
        await self._record(session_id, request_id, reply)
        waiting = self._waiting.get(request_id)
        if waiting is not None:
            self._replies[request_id] = reply
            waiting.set()

    async def _record(self, session_id: str, request_id: str, reply: PermissionReply) -> None:
        replied = ev.PermissionReplied(
            timestamp=self._now(), session_id=session_id, request_id=request_id, reply=reply
        )
        await self._storage.write(ReplyPermission(replied=replied))

    async def is_approved(self, project: str, permission: str, resource: str) -> bool:
        return await self._storage.read(
            IsApproved(project=project, permission=permission, resource=resource)
        )

    async def save(self, project: str, permission: str, resource: str) -> None:
        row = ApprovalRow(project, permission, resource, self._now())
        await self._storage.write(SaveApproval(row=row))
