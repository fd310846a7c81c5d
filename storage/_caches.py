"""The DuckDB store's caches: session rows, inbox rows, messages, epochs, permissions and
per-session histories, read through to DuckDB on a miss.

Entries the database does not hold yet (written to the journal, not yet applied) are
pinned: never evicted until the applier has them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import msgspec

from runtime import SessionMessage
from runtime import events as ev
from runtime.history import HistoryDelta
from storage._batch import EpochRow
from storage._state import StoreState

__all__ = ["CACHE_HISTORIES", "CACHE_MESSAGES", "StoreCaches"]


CACHE_MESSAGES: Final = 4096
CACHE_HISTORIES: Final = 512
decode_message = msgspec.json.Decoder(SessionMessage).decode
decode_info = msgspec.json.Decoder(ev.SessionInfo).decode
_decode_prompt = msgspec.json.Decoder(ev.Prompt).decode
decode_permission = msgspec.json.Decoder(ev.PermissionInfo).decode


class _History:
    """One session's projected messages, most recently changed last.

    ``version`` counts changes; each entry remembers the version that last changed
    it, so the changes after a reader's version are a walk back from the end.
    """

    __slots__ = ("entries", "generation", "version")

    def __init__(self, generation: int, rows: Iterable[tuple[str, int, SessionMessage]]) -> None:
        self.generation = generation
        self.version = 0
        self.entries: OrderedDict[str, tuple[int, SessionMessage, int]] = OrderedDict(
            (message_id, (seq, message, 0)) for message_id, seq, message in rows
        )

    def put(self, message_id: str, seq: int, message: SessionMessage) -> None:
        self.version += 1
        self.entries[message_id] = (seq, message, self.version)
        self.entries.move_to_end(message_id)

    def listing(self, from_seq: int = 0) -> list[tuple[int, SessionMessage]]:
        rows = [(seq, message) for seq, message, _ in self.entries.values() if seq >= from_seq]
        rows.sort(key=_by_seq)
        return rows

    def delta(self, generation: int, version: int) -> HistoryDelta:
        if generation != self.generation or version > self.version:
            return HistoryDelta(self.generation, self.version, True, self.listing())
        changed: list[tuple[int, SessionMessage]] = []
        for seq, message, changed_at in reversed(self.entries.values()):
            if changed_at <= version:
                break
            changed.append((seq, message))
        changed.reverse()
        return HistoryDelta(self.generation, self.version, False, changed)


class _SessionRow(msgspec.Struct):
    info: ev.SessionInfo
    last_seq: int
    pending: list[ev.InputAdmitted] | None = None


class StoreCaches(StoreState):
    """The cache-backed reads of :class:`EventStore` (those write batches use too)."""

    def _cache(self, cache: OrderedDict[str, Any], key: str, value: Any, bound: int) -> None:
        """LRU insert; entries the database does not hold yet are never evicted."""
        cache[key] = value
        cache.move_to_end(key)
        if len(cache) <= bound:
            return
        applied = self._applier.applied_lsn if self._applier is not None else self._lsn
        if len(self._pinned) > 4 * bound:
            self._pinned = {k: v for k, v in self._pinned.items() if v > applied}
        while len(cache) > bound:
            oldest = next(iter(cache))
            if self._pinned.get(oldest, -1) > applied:
                break
            cache.popitem(last=False)

    def _forget(self, session_id: str) -> None:
        """Drop a deleted session from every cache; reads treat it as absent from now on."""
        self._deleted.add(session_id)
        self._sessions.pop(session_id, None)
        self._histories.pop(session_id, None)
        self._epochs[session_id] = None
        caches: list[tuple[OrderedDict[str, Any], Callable[[Any], str]]] = [
            (self._inputs, lambda row: row.session_id),
            (self._messages, lambda entry: entry[0]),
            (self._permissions, lambda info: info.session_id),
        ]
        for cache, owner in caches:
            for key in [key for key, value in cache.items() if owner(value) == session_id]:
                del cache[key]
                self._pinned.pop(key, None)

    def session_row(self, session_id: str) -> _SessionRow | None:
        row = self._sessions.get(session_id)
        if row is not None or session_id in self._deleted:
            return row
        found = self.conn.execute(
            "select data, (select coalesce(max(seq), -1) from event where aggregate_id = ?) "
            "from session where id = ?",
            [session_id, session_id],
        ).fetchone()
        if found is None:
            return None
        row = _SessionRow(info=decode_info(found[0]), last_seq=int(found[1]))
        self._sessions[session_id] = row
        return row

    def pending_inputs(self, session_id: str) -> list[ev.InputAdmitted]:
        """Unpromoted inbox rows of a session, in admission order."""
        row = self.session_row(session_id)
        if row is None:
            return []
        if row.pending is None:
            rows = self.conn.execute(
                "select id, session_id, prompt, delivery, admitted_seq, time_created "
                "from session_input where session_id = ? and promoted_seq is null "
                "order by admitted_seq",
                [session_id],
            ).fetchall()
            row.pending = [input_from_row(r) for r in rows]
        return list(row.pending)

    def input(self, message_id: str) -> ev.InputAdmitted | None:
        cached = self._inputs.get(message_id)
        if cached is not None or message_id in self._absent:
            return cached
        found = self.conn.execute(
            "select id, session_id, prompt, delivery, admitted_seq, time_created, promoted_seq "
            "from session_input where id = ?",
            [message_id],
        ).fetchone()
        return input_from_row(found) if found and found[1] not in self._deleted else None

    def message_entry(self, message_id: str) -> tuple[str, int, SessionMessage] | None:
        cached = self._messages.get(message_id)
        if cached is not None or message_id in self._absent:
            return cached
        found = self.conn.execute(
            "select session_id, seq, data from session_message where id = ?", [message_id]
        ).fetchone()
        if found is None or found[0] in self._deleted:
            return None
        entry = (str(found[0]), int(found[1]), decode_message(found[2]))
        self._cache(self._messages, message_id, entry, CACHE_MESSAGES)
        return entry

    def epoch(self, session_id: str) -> EpochRow | None:
        if session_id in self._epochs:
            return self._epochs[session_id]
        found = self.conn.execute(
            "select session_id, baseline, snapshot, agent, baseline_seq, replacement_seq, "
            "revision from session_context_epoch where session_id = ?",
            [session_id],
        ).fetchone()
        epoch = EpochRow(*found) if found else None
        self._epochs[session_id] = epoch
        return epoch

    def permission(self, request_id: str) -> ev.PermissionInfo | None:
        cached = self._permissions.get(request_id)
        if cached is not None:
            return cached
        found = self.conn.execute(
            "select data from permission_request where id = ?", [request_id]
        ).fetchone()
        info = decode_permission(found[0]) if found else None
        return None if info is None or info.session_id in self._deleted else info

    def is_approved(self, project: str, permission: str, resource: str) -> bool:
        if self._approvals is None:
            rows = self.conn.execute(
                "select project, permission, resource from permission_approval"
            ).fetchall()
            self._approvals = {(str(a), str(b), str(c)) for a, b, c in rows}
        return (project, permission, resource) in self._approvals

    def history(self, session_id: str, *, from_seq: int = 0) -> list[tuple[int, SessionMessage]]:
        """Every projected message at or after *from_seq*, chronological (cached per session)."""
        return self._history(session_id).listing(from_seq)

    def history_delta(self, session_id: str, generation: int, version: int) -> HistoryDelta:
        """The messages changed since a reader's (*generation*, *version*), or the whole
        history when the reader's copy is from another generation of the cache."""
        return self._history(session_id).delta(generation, version)

    def _history(self, session_id: str) -> _History:
        cached = self._histories.get(session_id)
        if cached is None:
            rows = (
                self._db()
                .execute(
                    "select id, seq, data from session_message where session_id = ? order by seq",
                    [session_id],
                )
                .fetchall()
            )
            loaded = [(str(r[0]), int(r[1]), decode_message(r[2])) for r in rows]
            if self._unapplied is not None:
                loaded += [
                    (message_id, seq, message)
                    for message_id, (owner, seq, message) in self._unapplied[0].messages.items()
                    if owner == session_id
                ]
                loaded = list({entry[0]: entry for entry in loaded}.values())
                loaded.sort(key=lambda entry: entry[1])
            cached = self._new_history(loaded)
            self._histories[session_id] = cached
            while len(self._histories) > CACHE_HISTORIES:
                self._histories.popitem(last=False)
        self._histories.move_to_end(session_id)
        return cached

    def _new_history(self, rows: Iterable[tuple[str, int, SessionMessage]]) -> _History:
        self._generations += 1
        return _History(self._generations, rows)


def _by_seq(entry: tuple[int, SessionMessage]) -> int:
    return entry[0]


def input_from_row(row: Sequence[Any]) -> ev.InputAdmitted:
    promoted = row[6] if len(row) > 6 and row[6] is not None else msgspec.UNSET
    return ev.InputAdmitted(
        id=row[0], session_id=row[1], prompt=_decode_prompt(row[2]), delivery=row[3],
        admitted_seq=int(row[4]), time_created=int(row[5]), promoted_seq=promoted,
    )  # fmt: skip
