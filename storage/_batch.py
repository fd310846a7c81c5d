"""One group-commit batch: an overlay over the store that plans events and projections.

Operations read through the overlay (batch first, then the store's caches, then
DuckDB), so later operations of a batch see earlier ones. Every overlay write is
undo-logged, so an operation that fails midway leaves the batch as it was.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import replace

from runtime import SessionMessage
from runtime import _schema as ev
from runtime._errors import PromptConflictError, SessionNotFoundError
from runtime._projection import project

if TYPE_CHECKING:
    from storage._store import EventStore, _SessionRow

__all__ = [
    "AdmitPrompt",
    "ApprovalRow",
    "EpochConflictError",
    "EpochRow",
    "StoredEvent",
    "WriteBatch",
]

_encode = msgspec.json.Encoder().encode
_decode_event = msgspec.json.Decoder(ev.DurableEvent).decode
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


class AdmitPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """The admission operation; the store prefetches every ``message_id`` of a batch at once."""

    session_id: str
    message_id: str
    prompt: ev.Prompt
    delivery: ev.Delivery
    timestamp: int

    def __call__(self, batch: WriteBatch) -> tuple[ev.InputAdmitted, bool]:
        return batch.admit(
            self.session_id, self.message_id, self.prompt, self.delivery, self.timestamp
        )


class WriteBatch:
    """The overlay of one batch; see the module docstring."""

    def __init__(self, store: EventStore) -> None:
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
        self.changed_sessions: set[str] = set()
        self._undo: list[tuple[Any, Any, Any]] = []

    # -- undo log -----------------------------------------------------------------------

    def mark(self) -> tuple[int, int, int]:
        return len(self._undo), len(self.events), len(self.approvals)

    def rollback(self, mark: tuple[int, int, int]) -> None:
        undo_len, events_len, approvals_len = mark
        del self.approvals[approvals_len:]
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

    # -- domain operations ------------------------------------------------------------

    def create_session(self, info: ev.SessionInfo) -> tuple[ev.SessionInfo, bool]:
        """Create *info* unless its id exists; return (the stored info, created?)."""
        existing = self._row(info.id)
        if existing is not None:
            return existing.info, False
        from storage._store import _SessionRow

        self._set(self.sessions, info.id, _SessionRow(info=info, last_seq=-1, pending=[]))
        self._add(self.new_sessions, info.id)
        created = ev.SessionCreated(timestamp=info.time.created, session_id=info.id, info=info)
        self.append(info.id, [created])
        return info, True

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

    def promote(
        self, session_id: str, *, cutoff_seq: int, queued: bool, timestamp: int
    ) -> list[ev.InputAdmitted]:
        """Promote pending steers admitted at or before *cutoff_seq*, oldest first.

        With *queued*, first open the oldest pending queued prompt as well. Rows
        already promoted are skipped, so concurrent calls promote each row once.
        """
        pending = self.pending(session_id)
        chosen: list[ev.InputAdmitted] = []
        if queued:
            chosen.extend([row for row in pending if row.delivery == "queue"][:1])
        chosen.extend(r for r in pending if r.delivery == "steer" and r.admitted_seq <= cutoff_seq)
        chosen.sort(key=lambda r: r.admitted_seq)
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
        event = _decode_event(stored.data)
        if isinstance(event, ev.SessionCreated) and self._row(stored.aggregate_id) is None:
            from storage._store import _SessionRow

            row = _SessionRow(info=event.info, last_seq=-1, pending=[])
            self._set(self.sessions, stored.aggregate_id, row)
            self._add(self.new_sessions, stored.aggregate_id)
        row = self._writable_row(stored.aggregate_id)
        row.last_seq = stored.seq
        self.events.append(stored)
        project(event, stored.seq, self)

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
        return self.epochs.get(session_id) or self._store.epoch(session_id)

    def save_approval(self, row: ApprovalRow) -> None:
        """Remember a per-project "always" approval (journaled with the batch)."""
        if not self._store.is_approved(row.project, row.permission, row.resource):
            self.approvals.append(row)

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
        row = self.input(message_id)
        if row is None:
            return
        self._set(self.inputs, message_id, replace(row, promoted_seq=seq))
        session = self._writable_row(session_id)
        session.pending = [r for r in self.pending(session_id) if r.id != message_id]

    def message(self, session_id: str, message_id: str) -> SessionMessage | None:
        entry = self.messages.get(message_id) or self._store.message_entry(message_id)
        if entry is None or entry[0] != session_id:
            return None
        return entry[2]

    def put_message(self, session_id: str, seq: int, message: SessionMessage) -> None:
        if seq < 0:
            entry = self.messages.get(message.id) or self._store.message_entry(message.id)
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
        return self.permissions.get(request_id) or self._store.permission(request_id)

    def put_permission(self, info: ev.PermissionInfo) -> None:
        if self.permission(info.id) is None:
            self._add(self.new_permissions, info.id)
        self._set(self.permissions, info.id, info)

    # -- reads through the overlay ---------------------------------------------------------

    def input(self, message_id: str) -> ev.InputAdmitted | None:
        return self.inputs.get(message_id) or self._store.input(message_id)

    def pending(self, session_id: str) -> list[ev.InputAdmitted]:
        row = self.sessions.get(session_id)
        if row is not None and row.pending is not None:
            return list(row.pending)
        return self._store.pending_inputs(session_id)

    def _row(self, session_id: str) -> _SessionRow | None:
        return self.sessions.get(session_id) or self._store.session_row(session_id)

    def _writable_row(self, session_id: str) -> _SessionRow:
        row = self.sessions.get(session_id)
        if row is not None:
            return row
        base = self._store.session_row(session_id)
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

    def statements(self) -> Iterator[tuple[str, list[list[Any]]]]:
        """The batch's writes: one ``insert ... select unnest(?)`` or update per table."""
        yield (
            _insert("event", 6),
            _columns(
                (e.id, e.aggregate_id, e.seq, f"{e.type}.{e.version}", e.version, e.data.decode())
                for e in self.events
            ),
        )
        sessions = [(sid, row.info) for sid, row in self.sessions.items()]
        yield (
            _insert("session", 6),
            _columns(_session_row(i) for sid, i in sessions if sid in self.new_sessions),
        )
        yield (
            _update("session", ["time_updated", "data"]),
            _columns(
                (sid, info.time.updated, _encode(info).decode())
                for sid, info in sessions
                if sid in self.changed_sessions and sid not in self.new_sessions
            ),
        )
        inputs = self.inputs.values()
        yield (
            _insert("session_input", 7),
            _columns(_input_row(r) for r in inputs if r.id in self.new_inputs),
        )
        yield (
            _update("session_input", ["promoted_seq"]),
            _columns((r.id, r.promoted_seq) for r in inputs if r.id not in self.new_inputs),
        )
        messages = self.messages.items()
        yield (
            _insert("session_message", 6),
            _columns(
                (mid, sid, m.__struct_config__.tag, seq, m.time.created, _encode(m).decode())
                for mid, (sid, seq, m) in messages
                if mid in self.new_messages
            ),
        )
        yield (
            _update("session_message", ["data"]),
            _columns(
                (mid, _encode(m).decode())
                for mid, (sid, seq, m) in messages
                if mid not in self.new_messages
            ),
        )
        permissions = self.permissions.values()
        yield (
            _insert("permission_request", 5),
            _columns(
                (p.id, p.session_id, p.status, p.time_created, _encode(p).decode())
                for p in permissions
                if p.id in self.new_permissions
            ),
        )
        yield (
            _update("permission_request", ["status", "data"]),
            _columns(
                (p.id, p.status, _encode(p).decode())
                for p in permissions
                if p.id not in self.new_permissions
            ),
        )
        yield (
            _insert("permission_approval", 4),
            _columns(msgspec.structs.astuple(a) for a in self.approvals),
        )
        cleared = sorted(self.cleared_epochs | set(self.epochs))
        yield (
            "delete from session_context_epoch where session_id in (select unnest(?))",
            [cleared] if cleared else [[]],
        )
        yield (
            _insert("session_context_epoch", 7),
            _columns(msgspec.structs.astuple(x) for x in self.epochs.values()),
        )


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


def _update(table: str, columns: list[str]) -> str:
    names = ["k", *(f"c{i}" for i in range(len(columns)))]
    select = ", ".join(f"unnest(?) as {n}" for n in names)
    sets = ", ".join(f"{c} = u.c{i}" for i, c in enumerate(columns))
    key = "session_id" if table == "session_context_epoch" else "id"
    return f"update {table} set {sets} from (select {select}) u where {table}.{key} = u.k"


def _insert(table: str, width: int) -> str:
    return f"insert into {table} select " + ", ".join(["unnest(?)"] * width)


def _columns(rows: Iterator[tuple[Any, ...]]) -> list[list[Any]]:
    materialized = list(rows)
    if not materialized:
        return [[]]
    return [list(column) for column in zip(*materialized, strict=True)]
