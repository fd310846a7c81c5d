"""The PostgreSQL store: the storage port over psycopg 3, one connection, group commit.

Not thread-safe: exactly one thread (the StorageActor's, or the trio thread in inline
mode) calls it, as with the DuckDB store. A batch is planned on the same overlay
(``storage._batch.WriteBatch``) with the same commands (``storage._commands``) and
projections, then written in one PostgreSQL transaction; callers are answered once it
committed. PostgreSQL's write-ahead log is the journal here (``synchronous_commit``
on: a commit returns once its WAL record is flushed), so there is no journal file,
no applier and no catch-up: what is committed is in the tables.

The caches and their read-through SQL are the DuckDB store's (``storage._caches``);
the SQL they issue is portable, with DuckDB's ``?`` placeholders turned into
psycopg's. The queries that use DuckDB's own functions (JSON, lists) and those that
pass a parameter only to test it for null are written again here.

One process per database, unless opened as a cluster worker (``owner=``): then no
exclusive lock, and every batch is one transaction that first locks the rows of the
sessions it touches (``select ... for update``, in id order) and compares their
``version`` with the one this store's caches are from; a session another worker wrote
since has its cached state dropped and re-read before the batch is planned. Each batch
that writes a session bumps its version and notifies (``storage._pg_listen``). Reads of a
session compare its version the same way first; reads by message or request id read
through. Leases and fencing: ``storage._leases``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import msgspec
import psycopg
from psycopg.pq import TransactionStatus

from runtime import IdGenerator, StorageError
from storage._batch import StoredEvent, WriteBatch
from storage._caches import CACHE_MESSAGES, decode_message, input_from_row
from storage._leases import (
    LEASE_SCHEMA,
    pg_check_fence,
    pg_lease_command,
    pg_lease_of,
    pg_orphans,
    session_of,
)
from storage._pg_listen import notify
from storage._pg_queries import PostgresQueries
from storage._pipeline import Outcome, WritePipeline
from storage._port import (
    AdmitAndOpen,
    AdmitPrompt,
    Command,
    IsApproved,
    Lease,
    MessageEntry,
    Permission,
    Query,
)
from storage._rows import _SESSION_ROWS, TABLES, RowSet
from storage._telemetry import batch_span, end_batch_span

__all__ = ["PostgresStatistics", "PostgresStore"]

T = TypeVar("T")

_SCHEMA: Final[list[list[str]]] = [
    [
        """create table event (
            id text not null,
            aggregate_id text not null,
            seq bigint not null,
            type text not null,
            version integer not null,
            data text not null,
            primary key (aggregate_id, seq))""",
        """create table session (
            id text primary key,
            project_id text not null,
            directory text not null,
            time_created bigint not null,
            time_updated bigint not null,
            data text not null)""",
        """create table session_input (
            id text primary key,
            session_id text not null,
            prompt text not null,
            delivery text not null,
            admitted_seq bigint not null,
            promoted_seq bigint,
            time_created bigint not null)""",
        "create index session_input_pending on session_input (session_id, admitted_seq) "
        "where promoted_seq is null",
        """create table session_message (
            id text primary key,
            session_id text not null,
            type text not null,
            seq bigint not null,
            time_created bigint not null,
            data text not null)""",
        "create index session_message_by_seq on session_message (session_id, seq)",
        """create table session_context_epoch (
            session_id text primary key,
            baseline text not null,
            snapshot text not null,
            agent text not null,
            baseline_seq bigint not null,
            replacement_seq bigint,
            revision bigint not null)""",
        """create table permission_request (
            id text primary key,
            session_id text not null,
            status text not null,
            time_created bigint not null,
            data text not null)""",
        "create index permission_request_by_session on permission_request (session_id)",
        """create table permission_approval (
            project text not null,
            permission text not null,
            resource text not null,
            time_created bigint not null)""",
    ],
    LEASE_SCHEMA,
]
SCHEMA_VERSION: Final = len(_SCHEMA)
_log = logging.getLogger("kittiwake.storage")
_SCHEMA_LOCK: Final = 0x4B697474  # an advisory lock key: one opener migrates at a time
_OWNER_LOCK: Final = 0x4B697475
"""A session-level advisory lock the connection of a store opened without ``owner`` holds
while open (its caches assume no other writer); cluster workers take it shared."""
DEFAULT_STALLED_TRANSACTION_MS: Final = 5_000
_ATTEMPTS: Final = 3
"""How often a cluster batch is planned again after a conflict with another worker's
commit (a key another worker inserted first, a deadlock) before it fails."""
_RETRY: Final = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
)
_INDEX_REBUILD: Final = 8 * CACHE_MESSAGES
"""Keys indexed since the index was rebuilt from the caches (evicted keys linger)."""
_KNOWN: Final = 65536
"""Sessions whose version a cluster store remembers; one forgotten has its caches dropped
and re-read the next time it is touched."""


class PostgresStatistics(msgspec.Struct, frozen=True, kw_only=True):
    batches: int
    operations: int
    events: int
    last_batch_size: int
    last_commit_ms: float
    database_bytes: int
    wal_lsn: int
    """The server's current WAL position, in bytes."""


class _Placeholders:
    """The psycopg connection, taking the DuckDB store's ``?`` placeholders (the shared
    read-through SQL in ``storage._caches`` and ``storage._queries``)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        return self._conn.execute(sql.replace("?", "%s"), params)


class PostgresStore(WritePipeline, PostgresQueries):
    """The store on PostgreSQL. Use :meth:`open`; close with :meth:`close`.

    Args:
        url: a libpq connection string or ``postgresql://`` URL.
        directory: the data dir (tool output lives there; the store keeps nothing in it).
        ids: makes the ids of stored events.
        connect_timeout: seconds to wait for the server at open.
        sync_thread: accepted for the StorageActor's threaded mode and ignored: a
            commit returns once it is durable, so there is no separate sync.
        owner: open as a cluster worker with this owner id: other workers may write the
            same database (see the module docstring). None: the one process on it.
        stalled_transaction_ms: a cluster worker's connection that stays this long inside
            a batch's transaction without sending anything (the process stopped or
            partitioned mid-batch) is ended by the server (PostgreSQL's
            ``idle_in_transaction_session_timeout``): its batch rolls back and the rows it
            locked are free for the other workers.
    """

    @classmethod
    def open(cls, url: str, *, directory: Path, **options: Any) -> PostgresStore:
        """Connect, bring the schema up to date and take the database's owner lock
        (shared for a cluster worker, exclusive otherwise).

        Raises:
            StorageError: the server cannot be reached, refused the schema, or a store
                opened without ``owner`` holds the database (or, without ``owner``, any
                other store does).
        """
        store = cls(url, directory=directory, **options)
        store._open()
        return store

    def __init__(
        self, url: str, *, directory: Path, ids: IdGenerator | None = None,
        connect_timeout: float = 10.0, sync_thread: bool = False, owner: str | None = None,
        stalled_transaction_ms: int = DEFAULT_STALLED_TRANSACTION_MS,
    ) -> None:  # fmt: skip
        super().__init__(Path(directory), ids=ids)
        self.owner = owner
        self._stalled_ms = stalled_transaction_ms
        self._versions: OrderedDict[str, int | None] = OrderedDict()
        """Cluster mode: the version of each session this store's caches are from."""
        self._keys: dict[str, set[str]] = {}
        """Cluster mode: the keys each session has in the keyed caches (``_cache``)."""
        self._indexed = 0
        self._url = url
        self._connect_timeout = connect_timeout
        self._pg: psycopg.Connection[Any] | None = None

    def _open(self) -> None:
        try:
            self._pg = psycopg.connect(
                self._url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
            )
            self._migrate()
            lock = "pg_try_advisory_lock" if self.owner is None else "pg_try_advisory_lock_shared"
            held = self.pg.execute(f"select {lock}(%s)", [_OWNER_LOCK]).fetchone()
            if self.owner is not None:  # a stopped worker must not hold its rows' locks
                self.pg.execute(
                    "select set_config('idle_in_transaction_session_timeout', %s, false)",
                    [str(self._stalled_ms)],
                )
        except psycopg.Error as exc:
            self.close()
            raise StorageError(f"PostgreSQL store did not open: {exc}") from exc
        if not held or not held[0]:
            self.close()
            raise StorageError(
                "PostgreSQL store did not open: another Kittiwake process uses this database "
                "(one process per database, or cluster workers only; docs/cluster.md)"
            )
        # The shared read-through SQL only needs ``execute``; see _Placeholders.
        self._conn = cast(Any, _Placeholders(self._pg))
        self._lsn = 0

    def _migrate(self) -> None:
        pg = self.pg
        with pg.transaction():
            pg.execute("select pg_advisory_xact_lock(%s)", [_SCHEMA_LOCK])
            pg.execute(
                "create table if not exists schema_version (version integer primary key, "
                "applied bigint)"
            )
            row = pg.execute("select coalesce(max(version), 0) from schema_version").fetchone()
            found = int(row[0]) if row else 0
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for statement in _SCHEMA[version - 1]:
                    pg.execute(statement)
                pg.execute(
                    "insert into schema_version values (%s, %s)", [version, time.time_ns() // 10**6]
                )

    def close(self) -> None:
        """Release this store's advisory locks, then close the connection; safe to call
        twice. The locks are released by name first: PostgreSQL frees a closed session's
        locks only when its backend has exited, after the client's close returns, so a
        store opened right after this one could still find them held. A connection that
        is already broken is just closed (its backend ends, and its locks with it)."""
        self._conn = None
        if self._pg is not None:
            pg, self._pg = self._pg, None
            try:
                if not pg.closed and pg.info.transaction_status == TransactionStatus.IDLE:
                    pg.execute("select pg_advisory_unlock_all()")
            except psycopg.Error as exc:
                _log.warning("releasing the store's advisory locks failed", exc_info=exc)
            finally:
                pg.close()

    # -- writes -------------------------------------------------------------------------

    def write_batch(
        self,
        operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        *,
        on_durable: Callable[[list[Outcome], list[StoredEvent]], None] | None = None,
        on_written: Callable[[list[Outcome]], None] | None = None,
    ) -> tuple[list[Outcome], list[StoredEvent]]:
        """Run *operations* as one group commit: one PostgreSQL transaction; answer each.

        The batch is planned and written in one transaction (lease commands and fence
        checks run in it too). A cluster worker's transaction first locks and
        revalidates the sessions the batch touches, and a batch that conflicts with
        another worker's commit (a key it inserted first, a deadlock) is planned again,
        at most ``_ATTEMPTS`` times in all. *on_written* then *on_durable* are called
        once the transaction committed (a commit is durable when it returns). An
        operation that raises gets that error and writes nothing; the others proceed.
        If the transaction fails, every operation gets StorageError and the store is
        broken (reopen it): nothing of the batch was written, so an exact retry is safe.
        """
        if self.broken:
            raise StorageError("the PostgreSQL store failed a commit; reopen it")
        touched = sorted({sid for op in operations if (sid := session_of(op)) is not None})
        started = time.perf_counter()
        span = batch_span(len(operations), 0)  # the events are counted at the end
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self.pg.transaction():
                    batch, outcomes, versions = self._plan_and_write(operations, touched)
            except _RETRY as exc:
                self._absent.clear()
                if self.owner is None or attempt == _ATTEMPTS:
                    end_batch_span(span, started, error=exc)
                    return self._commit_failed(exc, len(operations), on_durable)
                self._drop(touched)
                continue
            except psycopg.Error as exc:
                end_batch_span(span, started, error=exc)
                return self._commit_failed(exc, len(operations), on_durable)
            break
        if batch.events or batch.epochs or batch.approvals:
            self._lsn += 1
            self._last_commit_ms = (time.perf_counter() - started) * 1000
        self._adopt(batch, self._lsn)
        self._saw(versions)
        if span is not None:
            span.set_attribute("kittiwake.storage.events", len(batch.events))
        end_batch_span(span, started)
        if on_written is not None:
            on_written(outcomes)
        if on_durable is not None:
            on_durable(outcomes, batch.events)
        self._count(len(operations), len(batch.events))
        return outcomes, batch.events

    def _plan_and_write(
        self, operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        touched: list[str],
    ) -> tuple[WriteBatch, list[Outcome], dict[str, int | None]]:  # fmt: skip
        """Plan and write a batch in the open transaction; raise psycopg.Error to roll
        it back."""
        cluster = self.owner is not None
        if cluster:
            self._approvals = None  # other workers may have saved some
            if touched:
                self._revalidate(touched, lock=True)
        batch = WriteBatch(self)
        self._prefetch([a.message_id for a in map(_admission, operations) if a and not a.fresh])
        outcomes = [self._plan(batch, op) for op in operations]
        self._absent.clear()
        lost = next((o.error for o in outcomes if isinstance(o.error, psycopg.Error)), None)
        if lost is not None:  # a read while planning failed: the connection, not a command
            raise lost
        versions: dict[str, int | None] = {}
        if batch.events or batch.epochs or batch.approvals:
            self._write_rows(batch.rows())
            if cluster:
                written = {e.aggregate_id for e in batch.events} | set(batch.epochs)
                versions = self._bump(sorted(written))
                notify(self.pg, self.owner or "", batch.events)
        return batch, outcomes, versions

    # -- cluster mode: per-session cache validation ----------------------------------------

    def _revalidate(self, session_ids: Sequence[str], *, lock: bool) -> None:
        """Drop the cached state of every session another worker wrote since this store's
        caches were filled; with *lock*, lock the sessions' rows until the transaction
        ends first (in id order: two batches never deadlock on them)."""
        ids = sorted(set(session_ids))
        rows = self.pg.execute(
            "select id, version from session where id = any(%s) order by id"
            + (" for update" if lock else ""),
            [ids],
        ).fetchall()
        found: dict[str, int | None] = {str(r[0]): int(r[1]) for r in rows}
        for session_id in ids:
            version = found.get(session_id)
            if self._versions.get(session_id, -1) != version:
                self._drop([session_id])
            self._saw({session_id: version})

    def _bump(self, session_ids: list[str]) -> dict[str, int | None]:
        """Count a write to each session; the new versions (committed with the batch)."""
        if not session_ids:
            return {}
        rows = self.pg.execute(
            "update session set version = version + 1 where id = any(%s) returning id, version",
            [session_ids],
        ).fetchall()
        found: dict[str, int | None] = {str(r[0]): int(r[1]) for r in rows}
        return {sid: found.get(sid) for sid in session_ids}

    def _saw(self, versions: dict[str, int | None]) -> None:
        for session_id, version in versions.items():
            self._versions[session_id] = version
            self._versions.move_to_end(session_id)
        while len(self._versions) > _KNOWN:
            self._versions.popitem(last=False)

    def _drop(self, session_ids: Sequence[str]) -> None:
        """Drop *session_ids* from every cache (not as deleted: they are read again), by
        the key index (``_cache``) instead of a scan of the caches."""
        for session_id in session_ids:
            self._sessions.pop(session_id, None)
            self._histories.pop(session_id, None)
            self._epochs.pop(session_id, None)
            self._versions.pop(session_id, None)
            for key in self._keys.pop(session_id, ()):
                self._inputs.pop(key, None)
                self._messages.pop(key, None)
                self._permissions.pop(key, None)
                self._pinned.pop(key, None)

    def _cache(self, cache: OrderedDict[str, Any], key: str, value: Any, bound: int) -> None:
        """Cache as the DuckDB store does; a cluster store also indexes the key by the
        entry's session, so that dropping a session touches only its own entries."""
        super()._cache(cache, key, value, bound)
        if self.owner is None:
            return
        session_id = value[0] if cache is self._messages else value.session_id
        self._keys.setdefault(session_id, set()).add(key)
        self._indexed += 1
        if self._indexed > _INDEX_REBUILD:  # evicted keys linger in the index: rebuild it
            self._keys = {}
            for entries, sid_of in (
                (self._inputs, lambda row: row.session_id),
                (self._messages, lambda entry: entry[0]),
                (self._permissions, lambda info: info.session_id),
            ):
                for k, v in entries.items():
                    self._keys.setdefault(sid_of(v), set()).add(k)
            self._indexed = sum(map(len, self._keys.values()))

    def _lease_command(self, op: Command[Any]) -> Lease | None:
        return pg_lease_command(self.pg, op)

    def _check_fence(self, session_id: str | None, fence: int) -> None:
        pg_check_fence(self.pg, session_id, fence)

    def lease_of(self, session_id: str) -> Lease | None:
        return pg_lease_of(self.pg, session_id)

    def orphans(self, limit: int) -> list[str]:
        return pg_orphans(self.pg, limit)

    def _commit_failed(
        self, exc: BaseException, operations: int,
        on_durable: Callable[[list[Outcome], list[StoredEvent]], None] | None,
    ) -> tuple[list[Outcome], list[StoredEvent]]:  # fmt: skip
        self.broken = True
        error = StorageError(f"PostgreSQL commit failed: {exc}")
        error.__cause__ = exc
        failed = [Outcome(error=error) for _ in range(operations)]
        if on_durable is not None:
            on_durable(failed, [])
        return failed, []

    def answer(self, query: Query[T]) -> T:
        """Answer a query of the port (see ``StoreQueries.answer``).

        Raises StorageError when PostgreSQL fails the read (the store is then broken:
        reopen it), what answering raises otherwise.
        """
        try:
            if self.owner is not None:
                self._read_through(query)
            return super().answer(query)
        except psycopg.Error as exc:
            self.broken = True
            raise StorageError(f"PostgreSQL read failed: {exc}") from exc

    def _read_through(self, query: Query[Any]) -> None:
        """Cluster mode: drop what *query* would answer from a cache another worker may
        have changed (a session's state when its version moved; by id: always)."""
        if isinstance(query, MessageEntry):
            self._messages.pop(query.message_id, None)
        elif isinstance(query, Permission):
            self._permissions.pop(query.request_id, None)
        elif isinstance(query, IsApproved):
            self._approvals = None
        elif (session_id := session_of(query)) is not None:
            self._revalidate([session_id], lock=False)

    def after_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """Call *callback* at once: every commit was durable when it returned."""
        callback(None)

    def _write_rows(self, rows: RowSet) -> None:
        with self.pg.cursor() as cur:
            if rows.deleted:
                ids = sorted(rows.deleted)
                for table, column in _SESSION_ROWS:
                    cur.execute(f"delete from {table} where {column} = any(%s)", [ids])
            if rows.events:
                cur.executemany(_insert("event", 6), rows.events)
            for table, columns in TABLES.items():
                if new := list(rows.new[table].values()):
                    cur.executemany(_insert(table, len(columns)), new)
                if changed := list(rows.changed[table].values()):
                    sets = ", ".join(f"{c} = %s" for c in columns[1:])
                    cur.executemany(
                        f"update {table} set {sets} where {columns[0]} = %s",
                        [(*row[1:], row[0]) for row in changed],
                    )
            if rows.approvals:
                cur.executemany(_insert("permission_approval", 4), rows.approvals)
            if rows.epochs:
                cur.execute(
                    "delete from session_context_epoch where session_id = any(%s)",
                    [sorted(rows.epochs)],
                )
                epochs = [row for row in rows.epochs.values() if row is not None]
                if epochs:
                    cur.executemany(_insert("session_context_epoch", 7), epochs)

    def _prefetch(self, message_ids: list[str]) -> None:
        """Look up a batch's message ids in two queries instead of two per operation."""
        wanted = [i for i in message_ids if i not in self._inputs and i not in self._messages]
        if not wanted:
            return
        pg = self.pg
        found: set[str] = set()
        for row in pg.execute(
            "select id, session_id, prompt, delivery, admitted_seq, time_created, promoted_seq "
            "from session_input where id = any(%s)",
            [wanted],
        ).fetchall():
            if row[1] not in self._deleted:
                self._cache(self._inputs, row[0], input_from_row(row), CACHE_MESSAGES)
                found.add(row[0])
        for row in pg.execute(
            "select id, session_id, seq, data from session_message where id = any(%s)", [wanted]
        ).fetchall():
            if row[1] not in self._deleted:
                entry = (str(row[1]), int(row[2]), decode_message(row[3]))
                self._cache(self._messages, row[0], entry, CACHE_MESSAGES)
                found.add(row[0])
        self._absent.update(set(wanted) - found)

    def statistics(self) -> PostgresStatistics:  # type: ignore[override]
        row = self.pg.execute(
            "select pg_database_size(current_database()), "
            "(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
        ).fetchone()
        assert row is not None
        return PostgresStatistics(
            **self._stats, last_commit_ms=self._last_commit_ms, database_bytes=int(row[0]),
            wal_lsn=int(row[1]),
        )  # fmt: skip

    def checkpoint_and_backup(self) -> int:
        """Backups of a PostgreSQL store are the server's (``pg_basebackup``, WAL
        archiving); answer the WAL position every commit so far is durable in."""
        row = self.pg.execute("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")
        found = row.fetchone()
        return int(found[0]) if found else 0


def _insert(table: str, width: int) -> str:
    return f"insert into {table} values ({', '.join(['%s'] * width)})"


def _admission(op: object) -> AdmitPrompt | None:
    if isinstance(op, AdmitAndOpen):
        return op.admit
    return op if isinstance(op, AdmitPrompt) else None
