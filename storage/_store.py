"""The DuckDB event store: one connection, group-committed batches, projections, journal.

Not thread-safe: exactly one thread (the StorageActor's, or the trio thread in
inline mode) calls it. Writes go through :meth:`EventStore.write_batch`: every
operation of a batch plans its events against an in-memory overlay, the batch is
appended to the journal (fdatasync), then written in one DuckDB transaction; only
then are callers answered. Caches are updated after the commit, so a failed batch
leaves them as they were.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import duckdb
import msgspec

from runtime import IdGenerator, SessionMessage, StorageError
from runtime import events as ev
from runtime.history import HistoryDelta, cut_short
from storage._applier import Applier
from storage._backup import (
    BACKUP_FILE,
    DEFAULT_BACKUP_BATCHES,
    DEFAULT_BACKUP_JOURNAL_BYTES,
    BackupSchedule,
    check_tables,
    remove_staging,
    write_backup,
)
from storage._batch import ApprovalRow, EpochRow, StoredEvent, WriteBatch
from storage._commands import apply
from storage._journal import DEFAULT_SEGMENT_MAX_BYTES, Journal
from storage._port import AdmitAndOpen, AdmitPrompt, Command, Query
from storage._queries import answer
from storage._rows import RowSet
from storage._syncer import Syncer
from storage._tables import migrate

__all__ = ["DB_FILE", "EventStore", "Outcome", "StoreStatistics"]

_log = logging.getLogger("kittiwake.storage")
T = TypeVar("T")
DB_FILE: Final = "kittiwake.duckdb"
_CACHE_MESSAGES: Final = 4096
_CACHE_HISTORIES: Final = 512
_REPLAY_CHUNK: Final = 512
"""Journal records replayed into one DuckDB transaction at start-up."""
_DB_ASYNC_THREADS: Final = 0
"""DuckDB's asynchronous I/O pool. It serves only Parquet and CSV scans, which the store
never runs, and defaults to four threads per CPU (up to 256), each started at connect."""

_FOOTPRINT: Final = {
    "events": ("event", "aggregate_id"),
    "session": ("session", "id"),
    "inputs": ("session_input", "session_id"),
    "messages": ("session_message", "session_id"),
    "permissions": ("permission_request", "session_id"),
    "epoch": ("session_context_epoch", "session_id"),
}
"""The tables holding a session's records, by kind, and the column naming the session."""
_encode = msgspec.json.Encoder().encode
_decode_message = msgspec.json.Decoder(SessionMessage).decode
_decode_info = msgspec.json.Decoder(ev.SessionInfo).decode
_decode_prompt = msgspec.json.Decoder(ev.Prompt).decode
_decode_permission = msgspec.json.Decoder(ev.PermissionInfo).decode


class JournalRecord(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One committed batch as the journal keeps it."""

    events: list[StoredEvent]
    epochs: list[EpochRow] = []
    approvals: list[ApprovalRow] = []


_encode_record = msgspec.msgpack.Encoder().encode
_decode_record = msgspec.msgpack.Decoder(JournalRecord).decode


class Outcome(msgspec.Struct, frozen=True):
    """What one operation of a batch produced: a value, or the error it raised."""

    value: Any = None
    error: BaseException | None = None


class StoreStatistics(msgspec.Struct, frozen=True, kw_only=True):
    batches: int
    operations: int
    events: int
    last_batch_size: int
    last_commit_ms: float
    file_bytes: int
    journal_lsn: int
    recovered_batches: int
    rebuilt: bool
    journal_batches: int
    """Batches the journal holds: those since the last verified backup."""
    journal_bytes: int
    backups: int
    """Verified backups this store took since it opened."""
    last_backup_seconds: float


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


class EventStore:
    """The store. Use :meth:`open`; close with :meth:`close`.

    Args:
        directory: the data dir holding ``kittiwake.duckdb`` and ``journal/``.
        fsync: fdatasync the journal before answering (off only in benchmarks).
        db_fsync: let DuckDB fsync its own commits too. Off by default: the journal
            is fdatasynced first, and a database that trails or loses it is caught up.
        db_memory_mb: DuckDB's memory limit (its buffer pool spills beyond it).
        db_threads: DuckDB's worker threads.
        backup_every: a checkpoint, verified backup and journal release runs once the
            journal holds this many batches. The journal is the count: it holds exactly
            the batches since the last verified backup, so the count survives restarts.
        backup_journal_bytes: ... or once the journal holds this many bytes.
        journal_segment_bytes: the journal starts a new segment file past this size.
        sync_thread: fdatasync the journal on a thread of its own, so the next batch is
            planned and written while the previous one syncs (the StorageActor's
            threaded mode); off, :meth:`write_batch` syncs before it returns.
    """

    def __init__(
        self, directory: Path, *, fsync: bool = True,
        backup_every: int = DEFAULT_BACKUP_BATCHES,
        backup_journal_bytes: int = DEFAULT_BACKUP_JOURNAL_BYTES,
        journal_segment_bytes: int = DEFAULT_SEGMENT_MAX_BYTES,
        db_fsync: bool = False, db_memory_mb: int = 128, db_threads: int = 1,
        sync_thread: bool = False,
    ) -> None:  # fmt: skip
        self.directory = directory
        self._fsync = fsync
        self._db_fsync = db_fsync
        self._db_memory_mb = db_memory_mb
        self._db_threads = db_threads
        self._schedule = BackupSchedule(batches=backup_every, journal_bytes=backup_journal_bytes)
        self._segment_bytes = journal_segment_bytes
        self._backups = 0
        self._last_backup_seconds = 0.0
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._journal: Journal | None = None
        self._sessions: dict[str, _SessionRow] = {}
        self._inputs: OrderedDict[str, ev.InputAdmitted] = OrderedDict()
        self._messages: OrderedDict[str, tuple[str, int, SessionMessage]] = OrderedDict()
        self._epochs: dict[str, EpochRow | None] = {}
        self._stats = dict(batches=0, operations=0, events=0, last_batch_size=0)
        self._last_commit_ms = 0.0
        self._recovered = 0
        self._rebuilt = False
        self._ids = IdGenerator()
        self._absent: set[str] = set()
        self._applier: Applier | None = None
        self._pinned: dict[str, int] = {}
        self._histories: OrderedDict[str, _History] = OrderedDict()
        self._generations = 0
        self._lsn = -1
        self._unapplied: tuple[WriteBatch, int] | None = None
        self._sync_thread = sync_thread
        self._syncer: Syncer | None = None
        self._permissions: OrderedDict[str, ev.PermissionInfo] = OrderedDict()
        self._approvals: set[tuple[str, str, str]] | None = None
        self._deleted: set[str] = set()
        """Sessions deleted by this process: unread even while DuckDB still holds their rows."""
        self.broken = False

    # -- lifecycle ----------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, **options: Any) -> EventStore:
        """Open (creating, rebuilding or catching up from the journal as needed).

        Raises:
            StorageError: the database and journal together cannot be made consistent.
        """
        store = cls(Path(directory), **options)
        store._open()
        return store

    @staticmethod
    def check_free(directory: Path) -> None:
        """Return when no open store holds the data dir *directory* (see ``Journal.check_free``).

        Raises:
            JournalHeld: another open store holds it, naming the holder's process id.
        """
        Journal.check_free(Path(directory) / "journal")

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._journal = Journal.open(
            self.directory / "journal", fsync=self._fsync, segment_max_bytes=self._segment_bytes
        )
        remove_staging(self.directory)
        self._conn = self._connect_checked()
        self._restore_if_behind()
        self._catch_up()
        self._lsn = self.journal_lsn()
        self._applier = Applier(self._conn.cursor(), self._lsn)
        # A crash loop never reaches the threshold's batch: back up now, before serving.
        self._maybe_backup()
        if self._sync_thread:
            self._syncer = Syncer(self._sync_journal)

    def _connect_checked(self) -> duckdb.DuckDBPyConnection:
        path = self.directory / DB_FILE
        backup = self.directory / BACKUP_FILE
        if not path.exists() and backup.exists():
            # A fresh empty file would need the whole journal, which the backup let go of.
            _log.error("database missing, restoring the verified backup")
            self._set_aside(path)  # a stray .wal must not replay onto the backup
            self._rebuilt = True
            shutil.copyfile(backup, path)
        try:
            return self._connect(path)
        except Exception as exc:  # noqa: BLE001 - any failure to open means rebuild
            _log.error("database unusable, rebuilding from backup and journal", exc_info=exc)
        self._set_aside(path)
        self._rebuilt = True
        if backup.exists():
            shutil.copyfile(backup, path)
            try:
                return self._connect(path)
            except Exception as exc:  # noqa: BLE001
                _log.error("backup unusable, rebuilding from journal alone", exc_info=exc)
                self._set_aside(path)
        return self._connect(path)

    def _restore_if_behind(self) -> None:
        """Replace a database older than the journal's start by the verified backup.

        A backup lets the journal go only after the database's checkpoint, but DuckDB's
        own writes are not fsynced (``db_fsync=False``): a power loss can leave an intact
        database from before that checkpoint. The backup (fsynced before the release)
        and the journal still hold everything. Without a backup, or with one that is
        behind too, :meth:`_catch_up` refuses to open.
        """
        assert self._journal is not None
        path, backup = self.directory / DB_FILE, self.directory / BACKUP_FILE
        if self._journal.first_lsn <= self.journal_lsn() + 1 or not backup.exists():
            return
        _log.error(
            "database older than the journal, restoring the verified backup",
            extra={"database_lsn": self.journal_lsn(), "journal_first": self._journal.first_lsn},
        )
        self.conn.close()
        self._conn = None
        self._set_aside(path)
        self._rebuilt = True
        shutil.copyfile(backup, path)
        self._conn = self._connect(path)

    def _db_config(self) -> dict[str, Any]:
        """DuckDB's settings, given at connect so no default-sized thread pool ever starts."""
        # Small OLTP batches: bound DuckDB's buffer pool and worker threads explicitly.
        config: dict[str, Any] = {
            "memory_limit": f"{self._db_memory_mb}MB",
            "threads": self._db_threads,
            "async_threads": _DB_ASYNC_THREADS,
        }
        if not self._db_fsync:
            # The fdatasynced journal is the durable record; the database trails it.
            config["fsync_mode"] = "NONE"
        return config

    def _connect(self, path: Path) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect(str(path), config=self._db_config())
        try:
            # A session setting (not accepted at connect), inherited by cursors: without it a
            # statement running past 2 s (opening a large database, a checkpoint) draws a
            # progress bar on the server's terminal.
            conn.execute("set enable_progress_bar = false")
            found = migrate(conn, now_ms=time.time_ns() // 1_000_000)
            # Every data block is read now, so damage is found here and not on a later
            # write. A database created just now has no block to check.
            if found:
                check_tables(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_aside(self, path: Path) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for suffix in ("", ".wal"):
            victim = Path(str(path) + suffix)
            if victim.exists():
                victim.rename(Path(f"{victim}.corrupt-{stamp}"))

    def _catch_up(self) -> None:
        assert self._journal is not None
        applied = self.journal_lsn()
        first = self._journal.first_lsn
        if first is not None and first > applied + 1:
            raise StorageError(
                f"journal starts at {first} but the database holds only up to {applied}"
            )
        pending, last, written = RowSet(), applied, applied
        for lsn, payload in self._journal.read(applied + 1):
            batch = self._replay(_decode_record(payload))
            self._adopt(batch, lsn)  # pins its cache entries until DuckDB has them
            pending.merge(batch.rows())
            last = lsn
            self._recovered += 1
            if self._recovered % _REPLAY_CHUNK == 0:
                self._write(pending, last)
                pending, written = RowSet(), last
        if last > written:
            self._write(pending, last)
        if self._recovered:
            _log.warning("caught up from journal", extra={"batches": self._recovered})

    def _replay(self, record: JournalRecord) -> WriteBatch:
        """Plan one journal record again (against the caches and the database)."""
        batch = WriteBatch(self)
        for stored in record.events:
            batch.replay_event(stored)
        for epoch in record.epochs:
            batch.put_epoch(epoch)
        for approval in record.approvals:
            batch.save_approval(approval)
        return batch

    def close(self) -> None:
        """Apply what is queued, checkpoint and close; safe to call twice."""
        if self._syncer is not None:
            syncer, self._syncer = self._syncer, None
            syncer.stop()
        if self._applier is not None:
            applier, self._applier = self._applier, None
            applier.stop()
        if self._conn is not None:
            try:
                self._conn.execute("checkpoint")
            finally:
                self._conn.close()
                self._conn = None
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    @property
    def conn(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None:
            raise StorageError("store is closed")
        return self._conn

    # -- writing ------------------------------------------------------------------------

    def write_batch(
        self,
        operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        *,
        on_durable: Callable[[list[Outcome], list[StoredEvent]], None] | None = None,
        on_written: Callable[[list[Outcome]], None] | None = None,
    ) -> tuple[list[Outcome], list[StoredEvent]]:
        """Run *operations* (commands of the port, or plans over the batch) as one group
        commit; answer each with its outcome.

        Returns the outcomes, in order, and the events the batch committed. With
        *on_durable*, it is called exactly once, as soon as the batch is fdatasynced
        in the journal (at once for a batch that wrote nothing), before the DuckDB
        transaction: callers may be answered then, since a database that trails the
        journal is caught up from it at the next open. With the sync thread
        (``sync_thread=True``), that happens on the sync thread, after this returns:
        the store's thread plans and writes the next batch meanwhile.
        With *on_written*, it is called between the journal write and its fdatasync
        (the batch is then visible to later batches and survives a killed process,
        not yet a power loss), so callers that only need ordering can go on while
        the fdatasync runs.

        An operation that raises gets that error and writes nothing; the others
        proceed. If the journal append (or its fdatasync) fails, every operation gets
        a StorageError (those already answered by *on_written* cannot be; the store
        is then broken and must be reopened, which rescans the journal). If the
        DuckDB transaction fails after the journal append, StorageError is raised
        and the store must be reopened (the journal keeps the batch).
        """
        self._check_applier()
        batch = WriteBatch(self)
        self._prefetch([a.message_id for a in map(_admission, operations) if a and not a.fresh])
        outcomes = [self._plan(batch, op) for op in operations]
        self._absent.clear()
        if batch.events or batch.epochs or batch.approvals:
            started = time.perf_counter()
            try:
                lsn = self._append_journal(batch, sync=False)
            except Exception as exc:
                return self._journal_failed(exc, len(operations), on_durable)
            applied_through, self._lsn = self._lsn, lsn
            self._adopt(batch, lsn)
            if on_written is not None:
                # Until the applier has it, reads of DuckDB stop at the previous batch and
                # a history loaded now takes this batch's messages from the overlay.
                self._unapplied = (batch, applied_through)
                try:
                    on_written(outcomes)
                finally:
                    self._unapplied = None

            def complete(error: BaseException | None) -> None:
                if error is not None:
                    self._journal_failed(error, len(operations), on_durable)
                    return
                if on_durable is not None:
                    on_durable(outcomes, batch.events)
                self._apply_later(batch, lsn)
                self._last_commit_ms = (time.perf_counter() - started) * 1000

            if self._syncer is not None:
                self._syncer.submit(complete)
            else:
                try:
                    self._sync_journal()
                except Exception as exc:
                    return self._journal_failed(exc, len(operations), on_durable)
                complete(None)
        else:
            self._adopt(batch, self._lsn)
            if on_written is not None:
                on_written(outcomes)
            if on_durable is not None:
                # It wrote nothing, but what it saw must be durable before it answers.
                self.after_durable(
                    lambda error: on_durable(
                        outcomes if error is None else self._failed(error, len(operations)), []
                    )
                )
        self._count(len(operations), len(batch.events))
        self._maybe_backup()
        return outcomes, batch.events

    def after_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """Call *callback* once everything written so far is durable (with the sync's
        error if that failed): at once without the sync thread, else from it, in order."""
        if self._syncer is not None:
            self._syncer.submit(callback)
        else:
            callback(None)

    def _failed(self, exc: BaseException, operations: int) -> list[Outcome]:
        error = StorageError(f"journal append failed: {exc}")
        error.__cause__ = exc
        return [Outcome(error=error) for _ in range(operations)]

    def _journal_failed(
        self,
        exc: BaseException,
        operations: int,
        on_durable: Callable[[list[Outcome], list[StoredEvent]], None] | None,
    ) -> tuple[list[Outcome], list[StoredEvent]]:
        self.broken = True
        failed = self._failed(exc, operations)
        if on_durable is not None:
            on_durable(failed, [])
        return failed, []

    def _prefetch(self, message_ids: list[str]) -> None:
        """Look up a batch's message ids in two queries instead of two per operation."""
        wanted = [i for i in message_ids if i not in self._inputs and i not in self._messages]
        if not wanted:
            return
        found: set[str] = set()
        for row in self.conn.execute(
            "select id, session_id, prompt, delivery, admitted_seq, time_created, promoted_seq "
            "from session_input where id in (select unnest(?))",
            [wanted],
        ).fetchall():
            if row[1] in self._deleted:
                continue
            self._cache(self._inputs, row[0], _input_from_row(row), _CACHE_MESSAGES)
            found.add(row[0])
        for row in self.conn.execute(
            "select id, session_id, seq, data from session_message where id in (select unnest(?))",
            [wanted],
        ).fetchall():
            if row[1] in self._deleted:
                continue
            entry = (str(row[1]), int(row[2]), _decode_message(row[3]))
            self._cache(self._messages, row[0], entry, _CACHE_MESSAGES)
            found.add(row[0])
        self._absent.update(set(wanted) - found)

    def _plan(self, batch: WriteBatch, op: Command[Any] | Callable[[WriteBatch], Any]) -> Outcome:
        mark = batch.mark()
        try:
            return Outcome(value=apply(batch, op) if isinstance(op, Command) else op(batch))
        except Exception as exc:  # noqa: BLE001 - the error is the operation's answer
            batch.rollback(mark)
            return Outcome(error=exc)

    def _commit(self, batch: WriteBatch) -> None:
        """Journal and write *batch* synchronously (rebuilds; no applier work pending)."""
        self._barrier()
        self._lsn = self._append_journal(batch)
        self._write(batch.rows(), self._lsn)
        if self._applier is not None:
            self._applier.note_applied(self._lsn)
        if self._applier is not None:
            # Written here, not by the (idle) applier: advance its mark, or the next read
            # barrier waits for an lsn the applier will never apply.
            self._applier.applied_lsn = self._lsn

    def _apply_later(self, batch: WriteBatch, lsn: int) -> None:
        assert self._applier is not None
        self._applier.submit(batch.rows(), lsn)

    def _check_applier(self) -> None:
        if self._applier is not None and self._applier.error is not None:
            self.broken = True
            raise StorageError(f"applying to the database failed: {self._applier.error}")

    def _barrier(self) -> None:
        """Wait until DuckDB holds every journaled batch (for reads that query it); while a
        batch is written but not yet handed to the applier, every batch before it."""
        if self._applier is not None:
            try:
                self._applier.wait_applied(
                    self._lsn if self._unapplied is None else self._unapplied[1]
                )
            except RuntimeError as exc:
                self.broken = True
                raise StorageError(str(exc)) from exc

    def _db(self) -> duckdb.DuckDBPyConnection:
        """The connection, after the read barrier."""
        self._barrier()
        return self.conn

    def _append_journal(self, batch: WriteBatch, *, sync: bool = True) -> int:
        assert self._journal is not None
        record = JournalRecord(
            events=batch.events, epochs=list(batch.epochs.values()), approvals=batch.approvals
        )
        return self._journal.append([_encode_record(record)], sync=sync)

    def _sync_journal(self) -> None:
        assert self._journal is not None
        self._journal.sync()

    def _write(self, rows: RowSet, lsn: int) -> None:
        conn = self.conn
        conn.execute("begin")
        try:
            for sql, columns in rows.statements():
                conn.execute(sql, columns)
            conn.execute("update meta set value = ? where key = 'journal_lsn'", [lsn])
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise

    def _adopt(self, batch: WriteBatch, lsn: int) -> None:
        for session_id in batch.deleted_sessions:
            self._forget(session_id)
        if self._deleted:
            self._deleted -= batch.new_sessions  # an id deleted, then created again
        for key in (*batch.inputs, *batch.messages):
            self._pinned[key] = lsn
        for session_id in batch.new_sessions:
            self._histories[session_id] = self._new_history([])  # known: empty
            self._epochs[session_id] = None  # known: none yet (set below if the batch made one)
        while len(self._histories) > _CACHE_HISTORIES:
            self._histories.popitem(last=False)
        for message_id, (session_id, seq, message) in batch.messages.items():
            history = self._histories.get(session_id)
            if history is not None:
                history.put(message_id, seq, message)
        for session_id, session in batch.sessions.items():
            self._sessions[session_id] = session
        for row in batch.inputs.values():
            self._cache(self._inputs, row.id, row, _CACHE_MESSAGES)
        for message_id, entry in batch.messages.items():
            self._cache(self._messages, message_id, entry, _CACHE_MESSAGES)
        for session_id, epoch in batch.epochs.items():
            self._epochs[session_id] = epoch
        for session_id in batch.cleared_epochs:
            self._epochs[session_id] = None
        for request_id, info in batch.permissions.items():
            self._cache(self._permissions, request_id, info, _CACHE_MESSAGES)
        if self._approvals is not None:
            self._approvals.update((a.project, a.permission, a.resource) for a in batch.approvals)

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

    def _count(self, operations: int, events: int) -> None:
        self._stats["batches"] += 1
        self._stats["operations"] += operations
        self._stats["events"] += events
        self._stats["last_batch_size"] = operations

    def new_event_id(self) -> str:
        return self._ids.new("evt")

    # -- backup -------------------------------------------------------------------------

    def _maybe_backup(self) -> None:
        """Back up when the journal holds a threshold's worth since the last backup.

        A failure is logged, not raised: nothing is lost (the journal keeps every record
        and the previous backup stays), and the next attempt waits for another
        threshold's worth of journal.
        """
        assert self._journal is not None
        if self.broken or not self._schedule.due(self._journal):
            return
        try:
            self.checkpoint_and_backup()
        except Exception as exc:  # noqa: BLE001 - logged; the journal still holds everything
            _log.error("backup failed; the journal keeps growing until one succeeds", exc_info=exc)
            self._schedule.failed(self._journal)

    def checkpoint_and_backup(self) -> int:
        """Checkpoint, copy the file, verify the copy, then release covered journal segments.

        Waits until DuckDB holds every journaled batch; the copy is verified and renamed
        over the previous backup (:func:`storage._backup.write_backup`) before the journal
        releases anything, so a crash at any point leaves a verified backup and a journal
        that reaches back to it. Returns the journal LSN the verified backup covers.

        Raises:
            StorageError: the copy did not verify; no journal segment was released.
            OSError: the copy, rename or release failed (a release part-way is finished
                by the next one).
        """
        assert self._journal is not None
        self._barrier()
        lsn = self.journal_lsn()
        self.conn.execute("checkpoint")
        seconds = write_backup(self.directory, self.directory / DB_FILE, lsn, self.conn)
        if lsn >= 0:
            self._journal.release_through(lsn)
        self._schedule.succeeded()
        self._backups += 1
        self._last_backup_seconds = seconds
        _log.info("verified backup", extra={"lsn": lsn, "seconds": round(seconds, 4)})
        return lsn

    # -- reads used by write batches -------------------------------------------------------

    def journal_lsn(self) -> int:
        row = self.conn.execute("select value from meta where key = 'journal_lsn'").fetchone()
        return int(row[0]) if row else -1

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
        row = _SessionRow(info=_decode_info(found[0]), last_seq=int(found[1]))
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
            row.pending = [_input_from_row(r) for r in rows]
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
        return _input_from_row(found) if found and found[1] not in self._deleted else None

    def message_entry(self, message_id: str) -> tuple[str, int, SessionMessage] | None:
        cached = self._messages.get(message_id)
        if cached is not None or message_id in self._absent:
            return cached
        found = self.conn.execute(
            "select session_id, seq, data from session_message where id = ?", [message_id]
        ).fetchone()
        if found is None or found[0] in self._deleted:
            return None
        entry = (str(found[0]), int(found[1]), _decode_message(found[2]))
        self._cache(self._messages, message_id, entry, _CACHE_MESSAGES)
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
        info = _decode_permission(found[0]) if found else None
        return None if info is None or info.session_id in self._deleted else info

    def is_approved(self, project: str, permission: str, resource: str) -> bool:
        if self._approvals is None:
            rows = self.conn.execute(
                "select project, permission, resource from permission_approval"
            ).fetchall()
            self._approvals = {(str(a), str(b), str(c)) for a, b, c in rows}
        return (project, permission, resource) in self._approvals

    def permissions(self, session_id: str) -> list[ev.PermissionInfo]:
        """A session's permission requests, oldest first."""
        rows = (
            self._db()
            .execute(
                "select data from permission_request where session_id = ? order by time_created, id",
                [session_id],
            )
            .fetchall()
        )
        return [_decode_permission(r[0]) for r in rows]

    # -- public reads -------------------------------------------------------------------

    def answer(self, query: Query[T]) -> T:
        """Answer a query of the port (``storage._port``). Raises what the read raises."""
        result: T = answer(self, query)
        return result

    def get_session(self, session_id: str) -> ev.SessionInfo | None:
        row = self.session_row(session_id)
        return row.info if row else None

    def last_seq(self, session_id: str) -> int:
        row = self.session_row(session_id)
        return row.last_seq if row else -1

    def list_sessions(self, *, limit: int, before: str | None) -> list[ev.SessionInfo]:
        """Sessions newest first (ids ascend with time), *limit* at most, ids below *before*."""
        rows = (
            self._db()
            .execute(
                "select data from session where (? is null or id < ?) order by id desc limit ?",
                [before, before, limit],
            )
            .fetchall()
        )
        return [_decode_info(r[0]) for r in rows]

    def children(self, session_id: str) -> list[ev.SessionInfo]:
        """The sessions created with *session_id* as their parent, oldest first."""
        rows = (
            self._db()
            .execute(
                "select data from session where json_extract_string(data, '$.parentID') = ? "
                "order by id",
                [session_id],
            )
            .fetchall()
        )
        return [_decode_info(r[0]) for r in rows]

    def session_ids_with_pending(self) -> list[str]:
        rows = (
            self._db()
            .execute(
                "select distinct session_id from session_input where promoted_seq is null "
                "order by session_id"
            )
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def sessions_needing_resume(self) -> list[str]:
        """Sessions marked as needing a resume (``needsResume``), and those whose latest
        conversational message (user, assistant, synthetic) shows work cut short and not
        yet recovered (``runtime._recovery.cut_short``); system and switch messages don't
        count."""
        db = self._db()
        marked = db.execute(
            "select id from session where json_extract_string(data, '$.needsResume') = 'true'"
        ).fetchall()
        rows = db.execute(
            "select m.session_id, m.data from session_message m join "
            "(select session_id, max(seq) as s from session_message "
            "where type in ('user', 'assistant', 'synthetic') group by session_id) x "
            "on m.session_id = x.session_id and m.seq = x.s"
        ).fetchall()
        out = {str(r[0]) for r in marked}
        out.update(str(sid) for sid, data in rows if cut_short(_decode_message(data)))
        return sorted(out)

    def messages(
        self, session_id: str, *, limit: int, order: str, after_seq: int | None = None,
        before_seq: int | None = None,
    ) -> list[tuple[int, SessionMessage]]:  # fmt: skip
        """A page of projected messages by creating-event seq."""
        direction = "desc" if order == "desc" else "asc"
        rows = (
            self._db()
            .execute(
                "select seq, data from session_message where session_id = ? "
                "and (? is null or seq > ?) and (? is null or seq < ?) "
                f"order by seq {direction} limit ?",
                [session_id, after_seq, after_seq, before_seq, before_seq, limit],
            )
            .fetchall()
        )
        return [(int(r[0]), _decode_message(r[1])) for r in rows]

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
            loaded = [(str(r[0]), int(r[1]), _decode_message(r[2])) for r in rows]
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
            while len(self._histories) > _CACHE_HISTORIES:
                self._histories.popitem(last=False)
        self._histories.move_to_end(session_id)
        return cached

    def _new_history(self, rows: Iterable[tuple[str, int, SessionMessage]]) -> _History:
        self._generations += 1
        return _History(self._generations, rows)

    def events(self, session_id: str, *, after: int, limit: int) -> list[StoredEvent]:
        """Durable events with seq > *after*, ascending, *limit* at most."""
        rows = (
            self._db()
            .execute(
                "select id, aggregate_id, seq, type, version, data from event "
                "where aggregate_id = ? and seq > ? order by seq limit ?",
                [session_id, after, limit],
            )
            .fetchall()
        )
        return [_stored_from_row(r) for r in rows]

    def all_events(self) -> Iterator[StoredEvent]:
        """Every durable event in (aggregate, seq) order; used to rebuild projections."""
        cursor = self._db().execute(
            "select id, aggregate_id, seq, type, version, data from event "
            "order by aggregate_id, seq"
        )
        while rows := cursor.fetchmany(1000):
            yield from (_stored_from_row(r) for r in rows)

    def rebuild_from(self, events: Iterable[StoredEvent], *, batch: int = 500) -> None:
        """Replay *events* (from another store) into this empty store's projections."""
        current = WriteBatch(self)
        for stored in events:
            current.replay_event(stored)
            if len(current.events) >= batch:
                self._commit(current)
                self._adopt(current, self._lsn)
                current = WriteBatch(self)
        if current.events:
            self._commit(current)
            self._adopt(current, self._lsn)

    def footprint(self, session_id: str) -> dict[str, int]:
        """Rows per kind of record the session holds in DuckDB (all 0 once deleted)."""
        db = self._db()
        counts = {}
        for kind, (table, column) in _FOOTPRINT.items():
            row = db.execute(
                f"select count(*) from {table} where {column} = ?", [session_id]
            ).fetchone()
            counts[kind] = int(row[0]) if row else 0
        return counts

    def statistics(self) -> StoreStatistics:
        path = self.directory / DB_FILE
        return StoreStatistics(
            **self._stats,
            last_commit_ms=self._last_commit_ms,
            file_bytes=path.stat().st_size if path.exists() else 0,
            journal_lsn=self._lsn,
            recovered_batches=self._recovered,
            rebuilt=self._rebuilt,
            journal_batches=self._journal.held_records if self._journal else 0,
            journal_bytes=self._journal.held_bytes if self._journal else 0,
            backups=self._backups,
            last_backup_seconds=self._last_backup_seconds,
        )


def _admission(op: object) -> AdmitPrompt | None:
    if isinstance(op, AdmitAndOpen):
        return op.admit
    return op if isinstance(op, AdmitPrompt) else None


def _by_seq(entry: tuple[int, SessionMessage]) -> int:
    return entry[0]


def _input_from_row(row: Sequence[Any]) -> ev.InputAdmitted:
    promoted = row[6] if len(row) > 6 and row[6] is not None else msgspec.UNSET
    return ev.InputAdmitted(
        id=row[0], session_id=row[1], prompt=_decode_prompt(row[2]), delivery=row[3],
        admitted_seq=int(row[4]), time_created=int(row[5]), promoted_seq=promoted,
    )  # fmt: skip


def _stored_from_row(row: Sequence[Any]) -> StoredEvent:
    # The type column holds "<type>.<version>" (see WriteBatch.statements); StoredEvent.type
    # is the bare type, so events read back replay (rebuild_from) into identical rows.
    return StoredEvent(
        id=row[0], aggregate_id=row[1], seq=int(row[2]),
        type=row[3].removesuffix(f".{int(row[4])}"), version=int(row[4]), data=row[5].encode(),
    )  # fmt: skip


def decode_stored(stored: StoredEvent) -> ev.DurableEvent:
    """Decode a stored event's data into its Struct."""
    return ev.decode_event(stored.data)
