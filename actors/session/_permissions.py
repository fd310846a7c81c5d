"""Durable permission requests and saved approvals, behind the tool registry's protocols.

``ask`` records ``permission.v2.asked`` durably, then waits for a client's reply
(``reply``), which is recorded as ``permission.v2.replied``. A request whose call
is cancelled while waiting is recorded as rejected: the call never ran.

A reply whose write is reported failed, or refused as already answered, puts the request
in doubt: the waiting call reads its durable state (``actors.session._replies``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

import trio

from actors.session._replies import AwaitedReplies, Stored
from actors.store import StorageActor
from runtime import InvalidInputError, PromptConflictError, SessionNotFoundError, StorageError
from runtime import events as ev
from runtime.agents import PermissionReply, PermissionRequest
from runtime.telemetry import span
from storage import Append, ApprovalRow, IsApproved, Permission, ReplyPermission, SaveApproval

__all__ = ["DurablePermissions"]

_CANCEL_GRACE: Final = 5.0
_REPLIES: Final = ("once", "always", "reject")


class DurablePermissions:
    """The runtime's ``PermissionGate`` and ``SavedApprovals``, backed by the event store."""

    def __init__(self, storage: StorageActor, now_ms: Callable[[], int]) -> None:
        self._storage = storage
        self._now = now_ms
        self._replies: AwaitedReplies[PermissionReply] = AwaitedReplies()

    async def ask(self, request: PermissionRequest) -> PermissionReply:
        """Record *request* and wait for its reply.

        Cancellation records the request as rejected (shielded, bounded; unless a reply
        was recorded first) and re-raises. A reply whose write failed is looked up in the
        store (waiting while it restarts); StorageError when the store cannot answer.
        """
        asked = ev.PermissionAsked(
            timestamp=self._now(), session_id=request.session_id, request_id=request.id,
            agent=request.agent, tool=request.tool, call_id=request.call_id,
            permission=request.permission, resources=request.resources,
        )  # fmt: skip
        self._replies.expect(request.id)
        try:
            await self._storage.write(Append(session_id=request.session_id, events=[asked]))
            attributes = {
                "session.id": request.session_id, "kittiwake.permission": request.permission,
                "gen_ai.tool.name": request.tool,
            }  # fmt: skip
            try:
                with span("permission.wait", attributes):
                    return await self._replies.wait(request.id, lambda: self._stored(request.id))
            except BaseException:
                # However the wait ends without a reply, the call does not run. A reply
                # that raced the cancellation stands: the cancellation still propagates.
                with trio.move_on_after(_CANCEL_GRACE, shield=True):
                    with contextlib.suppress(
                        PromptConflictError, SessionNotFoundError, StorageError
                    ):
                        await self._record(request.session_id, request.id, "reject")
                raise
        finally:
            self._replies.forget(request.id)

    async def reply(self, session_id: str, request_id: str, reply: PermissionReply) -> None:
        """Resolve a pending request with once / always / reject.

        Raises:
            InvalidInputError: an unknown reply.
            SessionNotFoundError: no such request in this session.
            PromptConflictError: the request was already answered.
            StorageError: the reply's write failed (it may be in the store all the same:
                the waiting call looks it up once the store serves again).
        """
        if reply not in _REPLIES:
            raise InvalidInputError(f"Unknown reply {reply!r}; use once, always or reject")
        try:
            await self._record(session_id, request_id, reply)
        except (StorageError, PromptConflictError):
            self._replies.doubt(request_id)  # the waiting call reads the stored answer
            raise
        self._replies.deliver(request_id, reply)

    async def _stored(self, request_id: str) -> Stored[PermissionReply] | None:
        """The request's answer as the store holds it (None: pending or unknown)."""
        info = await self._storage.read(Permission(request_id=request_id))
        if info is None or info.status == "pending":
            return None
        return Stored(info.status)

    def replied_elsewhere(self, request_id: str, reply: PermissionReply) -> None:
        """A reply another worker recorded (cluster mode): the tool call waiting here for
        *request_id*, if any, proceeds with it."""
        self._replies.deliver(request_id, reply)

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
