"""How the DuckDB store carries out each command of the port, inside one write batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from runtime import PromptConflictError, SessionNotFoundError
from runtime import events as ev
from runtime.messages import AssistantMessage, AssistantTool, SessionMessage, ToolError
from runtime.titles import needs_title
from storage import _port as p
from storage._batch import EpochRow, WriteBatch
from storage._records import PutRecord

__all__ = ["apply"]


def apply(batch: WriteBatch, command: p.Command[Any]) -> Any:
    """Plan *command* into *batch*; its answer. Raises what the command raises (the
    caller rolls the batch back to before it), TypeError for an unknown command."""
    try:
        handler = _HANDLERS[type(command)]
    except KeyError:
        raise TypeError(f"not a storage command: {command!r}") from None
    return handler(batch, command)


def _create(b: WriteBatch, c: p.CreateSession) -> tuple[ev.SessionInfo, bool]:
    return b.create_session(c.info, fresh=c.fresh)


def _delete(b: WriteBatch, c: p.DeleteSession) -> ev.SessionInfo:
    return b.delete_session(c.session_id, c.timestamp)


def _admit(b: WriteBatch, c: p.AdmitPrompt) -> tuple[ev.InputAdmitted, bool]:
    if c.unless_reverted and b.session(c.session_id).revert is not msgspec.UNSET:
        raise p.RevertStands(f"a revert of {c.session_id} stands: commit it first")
    admit = b.admit_fresh if c.fresh else b.admit
    return admit(c.session_id, c.message_id, c.prompt, c.delivery, c.timestamp)


def _admit_and_open(
    b: WriteBatch, c: p.AdmitAndOpen
) -> tuple[ev.InputAdmitted, list[ev.InputAdmitted], list[ev.InputAdmitted], ev.SessionInfo]:
    receipt, _ = _admit(b, c.admit)
    sid = c.admit.session_id
    promoted = b.promote(sid, opening=True, timestamp=c.admit.timestamp)
    return receipt, promoted, b.pending(sid), b.session(sid)


def _promote(
    b: WriteBatch, c: p.PromoteInputs
) -> tuple[list[ev.InputAdmitted], list[ev.InputAdmitted]]:
    promoted = b.promote(c.session_id, opening=c.opening, timestamp=c.timestamp)
    return promoted, b.pending(c.session_id)


def _append(b: WriteBatch, c: p.Append) -> list[int]:
    return b.append(c.session_id, c.events)


def _append_with_pending(b: WriteBatch, c: p.AppendWithPending) -> list[ev.InputAdmitted]:
    b.append(c.session_id, c.events)
    return b.pending(c.session_id)


def _fork(b: WriteBatch, c: p.ForkSession) -> ev.SessionInfo:
    info, _ = b.create_session(c.info, fresh=True)
    b.append(info.id, c.events)
    return info


def _import(b: WriteBatch, c: p.ImportSessions) -> list[ev.SessionInfo]:
    created: list[str] = []
    for stored in c.events:
        b.import_event(stored)
        if stored.seq == 0:
            created.append(stored.aggregate_id)
    return [b.session(sid) for sid in created]


def _ask(b: WriteBatch, c: p.AskPermission) -> None:
    asked = c.asked
    found = b.permission(asked.request_id)
    if found is None:
        b.append(asked.session_id, [asked])
    elif (found.session_id, found.permission, found.resources) != (
        asked.session_id, asked.permission, asked.resources,
    ):  # fmt: skip
        raise PromptConflictError(f"Permission request id {asked.request_id} is already in use")


def _reply(b: WriteBatch, c: p.ReplyPermission) -> None:
    replied = c.replied
    sid, request_id = replied.session_id, replied.request_id
    found = b.permission(request_id)
    if found is None or found.session_id != sid:
        raise SessionNotFoundError(f"{sid} has no permission request {request_id}")
    if found.status != "pending":
        raise PromptConflictError(f"Permission request {request_id} was already answered")
    b.append(sid, [replied])


def _reply_question(b: WriteBatch, c: p.ReplyQuestion) -> ev.InputAdmitted | None:
    sid, tool = c.replied.session_id, c.tool
    b.append(sid, [c.replied])
    if tool is not None and not _failed(b.message(sid, tool.message_id), tool.call_id):
        return None  # the call waits for the answer (here or on another worker)
    return _admit(b, c.late)[0]


def _failed(message: SessionMessage | None, call_id: str) -> bool:
    """Whether *message* holds the tool call *call_id* closed as failed."""
    return isinstance(message, AssistantMessage) and any(
        isinstance(part, AssistantTool) and part.id == call_id and isinstance(part.state, ToolError)
        for part in message.content
    )


def _save_approval(b: WriteBatch, c: p.SaveApproval) -> None:
    b.save_approval(c.row)


def _initialize_epoch(b: WriteBatch, c: p.InitializeEpoch) -> EpochRow:
    found = b.epoch(c.session_id)
    if found is not None:
        return found
    row = EpochRow(
        c.session_id, c.baseline, c.snapshot, c.agent, b.last_seq(c.session_id) + 1, None, 0
    )
    b.put_epoch(row)
    return row


def _admit_context(b: WriteBatch, c: p.AdmitContext) -> EpochRow:
    b.put_epoch(c.row, expected_revision=c.expected_revision)
    b.append(c.update.session_id, [c.update])
    return c.row


def _replace_epoch(b: WriteBatch, c: p.ReplaceEpoch) -> EpochRow:
    row = EpochRow(
        c.session_id, c.baseline, c.snapshot, c.agent, b.last_seq(c.session_id) + 1, None,
        c.expected_revision + 1,
    )  # fmt: skip
    b.put_epoch(row, expected_revision=c.expected_revision)
    return row


def _put_epoch(b: WriteBatch, c: p.PutEpoch) -> None:
    b.put_epoch(c.row, expected_revision=c.expected_revision)


def _set_title(b: WriteBatch, c: p.SetTitle) -> ev.SessionInfo | None:
    try:
        info = b.session(c.session_id)
    except SessionNotFoundError:
        return None
    if not c.rename and not needs_title(info):
        return None  # a title was set meanwhile: it stands
    time = msgspec.structs.replace(info.time, updated=c.timestamp)
    updated = msgspec.structs.replace(info, title=c.title, time=time)
    b.append(
        c.session_id,
        [ev.SessionUpdated(timestamp=c.timestamp, session_id=c.session_id, info=updated)],
    )
    return updated


def _set_share(b: WriteBatch, c: p.SetShare) -> ev.SessionInfo | None:
    try:
        info = b.session(c.session_id)
    except SessionNotFoundError:
        return None
    shared = not isinstance(info.share, msgspec.UnsetType)
    if shared == (c.share is not None):
        return info  # already shared (the link stands) or not shared: nothing to do
    time = msgspec.structs.replace(info.time, updated=c.timestamp)
    share = msgspec.UNSET if c.share is None else c.share
    updated = msgspec.structs.replace(info, share=share, time=time)
    b.append(
        c.session_id,
        [ev.SessionUpdated(timestamp=c.timestamp, session_id=c.session_id, info=updated)],
    )
    return updated


def _put_record(b: WriteBatch, c: PutRecord) -> None:
    b.put_record(c.row)


_HANDLERS: Final[dict[type[Any], Callable[[WriteBatch, Any], Any]]] = {
    p.CreateSession: _create,
    p.DeleteSession: _delete,
    p.AdmitPrompt: _admit,
    p.AdmitAndOpen: _admit_and_open,
    p.PromoteInputs: _promote,
    p.Append: _append,
    p.ForkSession: _fork,
    p.ImportSessions: _import,
    p.AppendWithPending: _append_with_pending,
    p.AskPermission: _ask,
    p.ReplyPermission: _reply,
    p.ReplyQuestion: _reply_question,
    p.SaveApproval: _save_approval,
    p.InitializeEpoch: _initialize_epoch,
    p.AdmitContext: _admit_context,
    p.ReplaceEpoch: _replace_epoch,
    p.PutEpoch: _put_epoch,
    p.SetTitle: _set_title,
    p.SetShare: _set_share,
    PutRecord: _put_record,
}
