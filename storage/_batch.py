"""One group-commit batch: an overlay over the store that plans events and projections.

Operations read through the overlay (batch first, then the store's caches, then
DuckDB), so later operations of a batch see earlier ones. Every overlay write is
undo-logged, so an operation that fails midway leaves the batch as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import replace

from runtime import (
    InvalidInputError,
    PromptConflictError,
    SessionMessage,
    SessionNotFoundError,
)
from runtime import events as ev
from runtime.history import project
from runtime.inbox import ALL_ADMITTED, to_promote
from storage._rows import RowSet

if TYPE_CHECKING:
    from storage._caches import StoreCaches, _SessionRow
    from storage._records import RecordRow

__all__ = [
    "ApprovalRow",
    "EpochConflictError",
    "EpochRow",
    "StoredEvent",
    "WriteBatch",
]

_encode = msgspec.json.Encoder().encode
_MISSING: Any = object()


class StoredEvent(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """A durable event as stored: ``data`` is the event's JSON, type tag included."""

    id: str
    aggregate_id: str
    seq: int
    type: str
    version: int
    data: bytes


class EpochRow(msgspec.Struct, frozen=True, array_like=True):
    """One ``session_context_epoch`` row."""

    session_id: str
    baseline: str
    snapshot: str
    agent: str
    baseline_seq: int
    replacement_seq: int | None
    revision: int


class ApprovalRow(msgspec.Struct, frozen=True, array_like=True):
    """One saved per-project "always" approval."""

    project: str
    permission: str
    resource: str
    time_created: int


class EpochConflictError(Exception):
    """The epoch row changed since it was read (optimistic revision check failed)."""


class WriteBatch:
    """The overlay of one batch; see the module docstring."""

    def __init__(self, store: StoreCaches) -> None:
        self._store = store
        self.events: list[StoredEvent] = []
        self.sessions: dict[str, _SessionRow] = {}
        self.inputs: dict[str, ev.InputAdmitted] = {}
        self.messages: dict[str, tuple[str, int, SessionMessage]] = {}
        self.epochs: dict[str, EpochRow] = {}
        self.cleared_epochs: set[str] = set()
        self.new_sessions: set[str] = set()
        self.new_inputs: set[str] = set()
        self.new_messages: set[str] = set()
        self.permissions: dict[str, ev.PermissionInfo] = {}
        self.new_permissions: set[str] = set()
        self.approvals: list[ApprovalRow] = []
        self.records: list[RecordRow] = []
        """Records written (``storage._records``), in order: the last of a key wins."""
        self.changed_sessions: set[str] = set()
        self.deleted_sessions: set[str] = set()
        self._dropped_at: dict[str, int] = {}
        """A deleted session: how many of ``events`` its deletion ends (they are not stored)."""
        self._undo: list[tuple[Any, Any, Any]] = []

    # -- undo log -----------------------------------------------------------------------

    def mark(self) -> tuple[int, int, int, int]:
        return len(self._undo), len(self.events), len(self.approvals), len(self.records)

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        undo_len, events_len, approvals_len, records_len = mark
        del self.approvals[approvals_len:]
        del self.records[records_len:]
        while len(self._undo) > undo_len:
            target, key, old = self._undo.pop()
            if isinstance(target, set):
                target.add(key) if old else target.discard(key)
            elif old is _MISSING:
                target.pop(key, None)
            else:
                target[key] = old
        del self.events[events_len:]

    def _add(self, target: set[str], key: str, *, present: bool = True) -> None:
        self._undo.append((target, key, key in target))
        target.add(key) if present else target.discard(key)

    def _set(self, target: dict[str, Any], key: str, value: Any) -> None:
        self._undo.append((target, key, target.get(key, _MISSING)))
        target[key] = value

    def _pop(self, target: dict[str, Any], key: str) -> None:
        if key in target:
            self._undo.append((target, key, target.pop(key)))

    # -- domain operations ------------------------------------------------------------

    def create_session(
        self, info: ev.SessionInfo, *, fresh: bool = False
    ) -> tuple[ev.SessionInfo, bool]:
        """Create *info* unless its id exists; return (the stored info, created?).

        *fresh* says this process just generated the id, so no stored session has it and
        it is not looked up.

        Raises:
            SessionNotFoundError: the parent session (``parent_id``) does not exist.
        """
        existing = None if fresh else self._row(info.id)
        if existing is not None:
            return existing.info, False
        parent = info.parent_id
        if isinstance(parent, str) and (parent == info.id or self._row(parent) is None):
            raise SessionNotFoundError(parent)
        from storage._caches import _SessionRow

        self._set(self.sessions, info.id, _SessionRow(info=info, last_seq=-1, pending=[]))
        self._add(self.new_sessions, info.id)
        created = ev.SessionCreated(timestamp=info.time.created, session_id=info.id, info=info)
        self.append(info.id, [created])
        return info, True

    def delete_session(self, session_id: str, timestamp: int) -> ev.SessionInfo:
        """Delete the session and everything it holds; return its last info.

        Raises:
            SessionNotFoundError: no such session.
        """
        info = self.session(session_id)
        self.append(
            session_id, [ev.SessionDeleted(timestamp=timestamp, session_id=session_id, info=info)]
        )
        return info

    def admit(
        self, session_id: str, message_id: str, prompt: ev.Prompt, delivery: ev.Delivery,
        timestamp: int,
    ) -> tuple[ev.InputAdmitted, bool]:  # fmt: skip
        """Admit one prompt into the inbox; an exact retry returns the stored receipt.

        Raises:
            SessionNotFoundError: no such session.
            PromptConflictError: the message id exists with other content or elsewhere.
        """
        if self._row(session_id) is None:
            raise SessionNotFoundError(session_id)
        existing = self.input(message_id)
        if existing is not None:
            same = (existing.session_id, existing.prompt, existing.delivery)
            if same != (session_id, prompt, delivery):
                raise PromptConflictError(f"Message id {message_id} was admitted differently")
            return existing, False
        if self.message(session_id, message_id) is not None or self._store.message_entry(
            message_id
        ):
            raise PromptConflictError(f"Message id {message_id} is already in use")
        event = ev.PromptAdmitted(
            timestamp=timestamp, session_id=session_id, message_id=message_id, prompt=prompt,
            delivery=delivery,
        )  # fmt: skip
        self.append(session_id, [event])
        return self.inputs[message_id], True

    def admit_fresh(
        self, session_id: str, message_id: str, prompt: ev.Prompt, delivery: ev.Delivery,
        timestamp: int,
    ) -> tuple[ev.InputAdmitted, bool]:  # fmt: skip
        """Admit a prompt whose id this process generated (no conflict lookup needed).

        Raises:
            SessionNotFoundError: no such session.
        """
        if self._row(session_id) is None:
            raise SessionNotFoundError(session_id)
        event = ev.PromptAdmitted(
            timestamp=timestamp, session_id=session_id, message_id=message_id, prompt=prompt,
            delivery=delivery,
        )  # fmt: skip
        self.append(session_id, [event])
        return self.inputs[message_id], True

    def promote(
        self, session_id: str, *, opening: bool, timestamp: int, cutoff_seq: int = ALL_ADMITTED
    ) -> list[ev.InputAdmitted]:
        """Promote what the promotion rule (``runtime.to_promote``) picks among the
        session's pending rows, oldest first; return the promoted rows. Rows already
        promoted are not pending, so concurrent calls promote each row once."""
        chosen = to_promote(self.pending(session_id), opening=opening, cutoff_seq=cutoff_seq)
        events = [
            ev.PromptPromoted(
                timestamp=timestamp,
                session_id=session_id,
                message_id=row.id,
                prompt=row.prompt,
                time_created=row.time_created,
            )  # fmt: skip
            for row in chosen
        ]
        self.append(session_id, events)
        return [self.inputs[row.id] for row in chosen]

    def append(self, session_id: str, events: Sequence[ev.DurableEvent]) -> list[int]:
        """Give *events* the next seqs of *session_id*, project them, queue them."""
        seqs: list[int] = []
        for event in events:
            row = self._writable_row(session_id)
            seq = row.last_seq + 1
            row.last_seq = seq
            self._store_event(session_id, seq, event)
            project(event, seq, self)
            seqs.append(seq)
        return seqs

    def replay_event(self, stored: StoredEvent) -> None:
        """Re-apply one stored event (journal catch-up, projection rebuild)."""
        event = ev.decode_event(stored.data)
        if isinstance(event, ev.SessionCreated) and self._row(stored.aggregate_id) is None:
            from storage._caches import _SessionRow

            row = _SessionRow(info=event.info, last_seq=-1, pending=[])
            self._set(self.sessions, stored.aggregate_id, row)
            self._add(self.new_sessions, stored.aggregate_id)
        row = self._writable_row(stored.aggregate_id)
        row.last_seq = stored.seq
        self.events.append(stored)
        project(event, stored.seq, self)

    def import_event(self, stored: StoredEvent) -> None:
        """Store one event exported from another store as it was (its session, seq, type,
        version and JSON bytes) under a new event id, and project it.

        Raises:
            PromptConflictError: it creates a session that exists here.
            InvalidInputError: its JSON is not an event of its type and session, or its seq
                does not follow its session's last one (0 for ``session.created``).
        """
        try:
            event = ev.decode_event(stored.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidInputError(f"event {stored.seq} of {stored.aggregate_id}: {exc}") from None
        tag = event.__struct_config__.tag
        if (tag, event.VERSION, event.session_id) != (
            stored.type, stored.version, stored.aggregate_id,
        ):  # fmt: skip
            raise InvalidInputError(
                f"event {stored.seq} of {stored.aggregate_id} is a {tag} of {event.session_id}, "
                f"not the {stored.type} it is stored as"
            )
        row = self._row(stored.aggregate_id)
        if isinstance(event, ev.SessionCreated):
            if row is not None:
                raise PromptConflictError(f"Session {stored.aggregate_id} already exists")
            expected = 0
        else:
            expected = -1 if row is None else row.last_seq + 1
        if stored.seq != expected:
            raise InvalidInputError(
                f"event {stored.seq} of {stored.aggregate_id} does not follow its session's "
                f"events (expected seq {expected}: the export starts with session.created and "
                "has no gap)"
            )
        self.replay_event(msgspec.structs.replace(stored, id=self._store.new_event_id()))

    def put_epoch(self, epoch: EpochRow, *, expected_revision: int | None = None) -> None:
        """Write an epoch row; with *expected_revision*, only over that revision.

        Raises:
            EpochConflictError: the stored revision differs from *expected_revision*.
        """
        if expected_revision is not None:
            current = self.epoch(epoch.session_id)
            found = current.revision if current is not None else None
            if found != expected_revision:
                raise EpochConflictError(f"epoch revision {found}, expected {expected_revision}")
        self._set(self.epochs, epoch.session_id, epoch)
        self._add(self.cleared_epochs, epoch.session_id, present=False)

    def last_seq(self, session_id: str) -> int:
        """The session's highest seq so far, this batch included (-1 if none)."""
        row = self._row(session_id)
        if row is None:
            raise SessionNotFoundError(session_id)
        return row.last_seq

    def epoch(self, session_id: str) -> EpochRow | None:
        if session_id in self.cleared_epochs:
            return None
        if session_id in self.epochs or session_id in self.deleted_sessions:
            return self.epochs.get(session_id)
        return self._store.epoch(session_id)

    def save_approval(self, row: ApprovalRow) -> None:
        """Remember a per-project "always" approval (journaled with the batch)."""
        if not self._store.is_approved(row.project, row.permission, row.resource):
            self.approvals.append(row)

    def put_record(self, row: RecordRow) -> None:
        """Write a record (journaled with the batch), replacing its key's."""
        self.records.append(row)

    # -- ProjectionState ----------------------------------------------------------------

    def session(self, session_id: str) -> ev.SessionInfo:
        row = self._row(session_id)
        if row is None:
            raise SessionNotFoundError(session_id)
        return row.info

    def put_session(self, info: ev.SessionInfo) -> None:
        row = self._writable_row(info.id)
        row.info = info
        self._add(self.changed_sessions, info.id)

    def put_input(self, row: ev.InputAdmitted) -> None:
        self._set(self.inputs, row.id, row)
        self._add(self.new_inputs, row.id)
        session = self._writable_row(row.session_id)
        session.pending = [*self.pending(row.session_id), row]

    def promote_input(self, session_id: str, message_id: str, seq: int) -> None:
        pending = self.pending(session_id)
        # A promoted row is pending (oldest first, so usually at the front): no lookup.
        row = next((r for r in pending if r.id == message_id), None) or self.input(message_id)
        if row is None:
            return
        self._set(self.inputs, message_id, replace(row, promoted_seq=seq))
        session = self._writable_row(session_id)
        session.pending = [r for r in pending if r.id != message_id]

    def message(self, session_id: str, message_id: str) -> SessionMessage | None:
        entry = self.messages.get(message_id) or self._stored_message(message_id)
        if entry is None or entry[0] != session_id:
            return None
        return entry[2]

    def put_message(self, session_id: str, seq: int, message: SessionMessage) -> None:
        if seq < 0:
            entry = self.messages.get(message.id) or self._stored_message(message.id)
            seq = entry[1] if entry else 0
        else:
            self._add(self.new_messages, message.id)
        self._set(self.messages, message.id, (session_id, seq, message))

    def clear_epoch(self, session_id: str) -> None:
        self._add(self.cleared_epochs, session_id)
        if session_id in self.epochs:
            self._set(self.epochs, session_id, self.epochs[session_id])
            del self.epochs[session_id]

    def permission(self, request_id: str) -> ev.PermissionInfo | None:
        found = self.permissions.get(request_id)
        if found is not None:
            return found
        found = self._store.permission(request_id)
        return None if found is None or found.session_id in self.deleted_sessions else found

    def put_permission(self, info: ev.PermissionInfo) -> None:
        if self.permission(info.id) is None:
            self._add(self.new_permissions, info.id)
        self._set(self.permissions, info.id, info)

    def drop_session(self, session_id: str) -> None:
        """Forget the session's rows, this batch's included; the store deletes its own."""
        self._add(self.deleted_sessions, session_id)
        self._set(self._dropped_at, session_id, len(self.events))
        self._pop(self.sessions, session_id)
        self._pop(self.epochs, session_id)
        for marks in (self.new_sessions, self.changed_sessions, self.cleared_epochs):
            self._add(marks, session_id, present=False)
        for key in [k for k, row in self.inputs.items() if row.session_id == session_id]:
            self._pop(self.inputs, key)
        for key in [k for k, entry in self.messages.items() if entry[0] == session_id]:
            self._pop(self.messages, key)
        for key in [k for k, info in self.permissions.items() if info.session_id == session_id]:
            self._pop(self.permissions, key)

    # -- reads through the overlay ---------------------------------------------------------

    def input(self, message_id: str) -> ev.InputAdmitted | None:
        found = self.inputs.get(message_id)
        if found is not None:
            return found
        found = self._store.input(message_id)
        return None if found is None or found.session_id in self.deleted_sessions else found

    def _stored_message(self, message_id: str) -> tuple[str, int, SessionMessage] | None:
        entry = self._store.message_entry(message_id)
        return None if entry is None or entry[0] in self.deleted_sessions else entry

    def pending(self, session_id: str) -> list[ev.InputAdmitted]:
        row = self.sessions.get(session_id)
        if row is not None and row.pending is not None:
            return list(row.pending)
        if session_id in self.deleted_sessions:
            return []
        return self._store.pending_inputs(session_id)

    def _row(self, session_id: str) -> _SessionRow | None:
        row = self.sessions.get(session_id)
        if row is not None or session_id in self.deleted_sessions:
            return row
        return self._store.session_row(session_id)

    def _writable_row(self, session_id: str) -> _SessionRow:
        row = self.sessions.get(session_id)
        if row is not None:
            return row
        base = None if session_id in self.deleted_sessions else self._store.session_row(session_id)
        if base is None:
            raise SessionNotFoundError(session_id)
        pending = self._store.pending_inputs(session_id)
        copy = type(base)(info=base.info, last_seq=base.last_seq, pending=pending)
        self._set(self.sessions, session_id, copy)
        return copy

    def _store_event(self, session_id: str, seq: int, event: ev.DurableEvent) -> None:
        stored = StoredEvent(
            id=self._store.new_event_id(), aggregate_id=session_id, seq=seq, type=event.__struct_config__.tag,  # type: ignore[arg-type]
            version=event.VERSION, data=_encode(event),
        )  # fmt: skip
        self.events.append(stored)

    # -- SQL ------------------------------------------------------------------------------

    def _kept_events(self) -> list[StoredEvent]:
        """The batch's events less those a later deletion in it ends (all, usually)."""
        dropped = self._dropped_at
        if not dropped:
            return self.events
        return [e for i, e in enumerate(self.events) if i >= dropped.get(e.aggregate_id, 0)]

    def rows(self) -> RowSet:
        """The batch's writes as final row states (see ``storage._rows``)."""
        rows = RowSet()
        rows.events = [
            (e.id, e.aggregate_id, e.seq, f"{e.type}.{e.version}", e.version, e.data.decode())
            for e in self._kept_events()
        ]
        rows.deleted = set(self.deleted_sessions)
        for sid, session in self.sessions.items():
            if sid in self.new_sessions or sid in self.changed_sessions:
                rows.put("session", _session_row(session.info), new=sid in self.new_sessions)
        for r in self.inputs.values():
            rows.put("session_input", _input_row(r), new=r.id in self.new_inputs)
        for mid, (sid, seq, m) in self.messages.items():
            message = (mid, sid, m.__struct_config__.tag, seq, m.time.created, _encode(m).decode())
            rows.put("session_message", message, new=mid in self.new_messages)
        for p in self.permissions.values():
            request = (p.id, p.session_id, p.status, p.time_created, _encode(p).decode())
            rows.put("permission_request", request, new=p.id in self.new_permissions)
        rows.approvals = [msgspec.structs.astuple(a) for a in self.approvals]
        rows.records = {(r.kind, r.id): msgspec.structs.astuple(r) for r in self.records}
        rows.epochs = {sid: None for sid in self.cleared_epochs}
        rows.epochs.update((sid, msgspec.structs.astuple(e)) for sid, e in self.epochs.items())
        return rows


def _session_row(info: ev.SessionInfo) -> tuple[Any, ...]:
    return (
        info.id, info.project_id, info.location.directory, info.time.created,
        info.time.updated, _encode(info).decode(),
    )  # fmt: skip


def _input_row(r: ev.InputAdmitted) -> tuple[Any, ...]:
    promoted = None if r.promoted_seq is msgspec.UNSET else r.promoted_seq
    return (
        r.id, r.session_id, _encode(r.prompt).decode(), r.delivery, r.admitted_seq, promoted,
        r.time_created,
    )  # fmt: skip
