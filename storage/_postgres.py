"""The PostgreSQL store: the storage port over psycopg 3, one connection, group commit.

Not thread-safe: exactly one thread (the StorageActor's, or the trio thread in inline
mode) calls it, as with the DuckDB store. A batch is planned on the same overlay
(``storage._batch.WriteBatch``) with the same commands (``storage._commands``) and
projections, then written in one PostgreSQL transaction, in two round trips to the
server (psycopg's pipeline mode: the locks and reads planning needs, then the rows and
the commit); callers are answered once it committed. PostgreSQL's write-ahead log is the
journal here (``synchronous_commit`` on: a commit returns once its WAL record is
flushed), so there is no journal file, no applier and no catch-up: what is committed is
in the tables. The schema and how rows are written: ``storage._pg_schema``.

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
session compare its version the same way first (one query for the reads answered
together); reads by message or request id read through. Leases and fencing:
``storage._leases``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import msgspec
import psycopg
from psycopg.pq import TransactionStatus

from runtime import IdGenerator, StorageError
from storage._batch import StoredEvent, WriteBatch
from storage._caches import CACHE_MESSAGES, decode_message, input_from_row
from storage._leases import (
    LeaseRow,
    LeaseTable,
    leased_session,
    needs_clock,
    pg_expect_leases,
    pg_lease_table,
    pg_lock_leases,
    pg_write_leases,
    session_of,
)
from storage._pg_caches import _KNOWN, ClusterCaches
from storage._pg_listen import notify
from storage._pg_schema import STALE, expect_versions, migrate, write_rows
from storage._pipeline import Outcome, WritePipeline
from storage._port import (
    AcquireLease,
    AdmitAndOpen,
    AdmitPrompt,
    Command,
    Lease,
    ParkLease,
    ReleaseLease,
    RenewLease,
)
from storage._telemetry_options import batch_span, end_batch_span

__all__ = ["PostgresStatistics", "PostgresStore"]

T = TypeVar("T")
_Bump = tuple[psycopg.Cursor[Any], list[str]]
"""A batch's version bump: its cursor (answered at the commit) and the sessions it wrote."""

_log = logging.getLogger("kittiwake.storage")
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
_SOFT: Final = (RenewLease, ParkLease, ReleaseLease)
"""Commands whose loss to a crash of the server is safe: a batch of these alone commits
without waiting for its WAL flush (``synchronous_commit`` off). A lost renewal, park or
release leaves the lease as it was, to expire: taken over, its holder's writes refused."""


class PostgresStatistics(msgspec.Struct, frozen=True, kw_only=True):
    batches: int
    operations: int
    events: int
    last_batch_size: int
    last_commit_ms: float
    database_bytes: int
    wal_lsn: int
    """The server's current WAL position, in bytes."""
    version_checks: int = 0
    """Cluster mode: round trips reads made to check their sessions' versions (a read
    right after a batch, ``then``, needs none)."""


class _Placeholders:
    """The psycopg connection, taking the DuckDB store's ``?`` placeholders (the shared
    read-through SQL in ``storage._caches`` and ``storage._queries``); a read made while a
    batch is planned is answered at once (``PostgresStore._sync``)."""

    def __init__(self, conn: psycopg.Connection[Any], sync: Callable[[], None]) -> None:
        self._conn = conn
        self._sync = sync

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        cursor = self._conn.execute(sql.replace("?", "%s"), params)
        self._sync()
        return cursor


class PostgresStore(ClusterCaches, WritePipeline):
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
        self._validate(owner)
        self._stalled_ms = stalled_transaction_ms
        self._lease_rows: OrderedDict[str, LeaseRow] = OrderedDict()
        """Cluster mode: the lease rows this store last read or wrote (``_unchanged``)."""
        self._leases_now: LeaseTable | None = None
        """The leases of the batch being planned, read under its locks."""
        self._pipeline: psycopg.Pipeline | None = None
        """The batch's pipeline while one is planned and written (``_sync``)."""
        self._url = url
        self._connect_timeout = connect_timeout
        self._pg: psycopg.Connection[Any] | None = None

    def _open(self) -> None:
        try:
            self._pg = psycopg.connect(
                self._url, autocommit=True, connect_timeout=max(1, int(self._connect_timeout))
            )
            migrate(self.pg)
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
        self._conn = cast(Any, _Placeholders(self._pg, self._sync))
        self._lsn = 0

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

        The batch is planned and written in one transaction, in two round trips to the
        server (psycopg's pipeline mode): the locks and reads planning needs (a cluster
        worker's sessions, the leases its lease and fenced commands name, the server's
        clock), then every row, lease, version and notification with the commit. A
        cluster worker's transaction revalidates the sessions the batch touches, and a
        batch that conflicts with another worker's commit (a key it inserted first, a
        deadlock) is planned again, at most ``_ATTEMPTS`` times in all. *on_written* then
        *on_durable* are called once the transaction committed (a commit is durable
        when it returns; a batch of lease renewals, parks and releases alone does not
        wait for its WAL flush, see ``_SOFT``). An operation that raises gets that error
        and writes nothing; the others proceed. If the transaction fails, every operation
        gets StorageError and the store is broken (reopen it): nothing of the batch was
        written, so an exact retry is safe.
        """
        if self.broken:
            raise StorageError("the PostgreSQL store failed a commit; reopen it")
        touched = sorted({sid for op in operations if (sid := session_of(op)) is not None})
        leased = sorted({sid for op in operations if (sid := leased_session(op)) is not None})
        soft = bool(operations) and all(isinstance(op, _SOFT) for op in operations)
        started = time.perf_counter()
        span = batch_span(len(operations), 0)  # the events are counted at the end
        optimistic = self._unchanged(operations, touched, leased)
        attempt = 0
        while True:
            try:
                with self._transaction(soft=soft):
                    batch, outcomes, bumped, expiries = self._plan_and_write(
                        operations, touched, leased, optimistic=optimistic
                    )
                versions = _versions(bumped)
                committed = self._leases_now
            except psycopg.Error as exc:
                self._absent.clear()
                self._forget_leases(leased)
                if optimistic and exc.sqlstate == STALE:  # planned on stale state: lock first
                    optimistic = False
                    self._drop(touched)
                    continue
                attempt += 1
                if isinstance(exc, _RETRY) and self.owner is not None and attempt < _ATTEMPTS:
                    self._drop(touched)
                    continue
                end_batch_span(span, started, error=exc)
                return self._commit_failed(exc, len(operations), on_durable)
            finally:
                self._leases_now = None
            break
        self._kept_leases(committed, leased, expiries, operations, outcomes)
        if batch.events or batch.epochs or batch.approvals or batch.records:
            self._lsn += 1
            self._last_commit_ms = (time.perf_counter() - started) * 1000
        self._adopt(batch, self._lsn)
        self._saw(versions)
        if span is not None:
            span.set_attribute("kittiwake.storage.events", len(batch.events))
        end_batch_span(span, started)
        if on_written is not None:
            self._fresh_reads = True  # *then* reads see this batch: validated under its locks
            try:
                on_written(outcomes)
            finally:
                self._fresh_reads = False
        if on_durable is not None:
            on_durable(outcomes, batch.events)
        self._count(len(operations), len(batch.events))
        return outcomes, batch.events

    def _plan_and_write(
        self, operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        touched: list[str], leased: list[str], *, optimistic: bool,
    ) -> tuple[WriteBatch, list[Outcome], _Bump | None, dict[str, psycopg.Cursor[Any]]]:  # fmt: skip
        """Plan and write a batch in the open transaction (pipelined: nothing waits for
        the server but the first read below and the commit); raise psycopg.Error to roll
        it back. *optimistic* (see ``_unchanged``): plan on the caches, then send the
        checks that they are current before the writes, all in one round trip. Answers
        the cursors of the version bump and of the lease expiries, read once committed."""
        pg = self.pg
        cluster = self.owner is not None
        if cluster:
            self._approvals = None  # other workers may have saved some
        if optimistic:
            self._leases_now = LeaseTable(lambda: 0)  # expiries relative to the write
            for sid in leased:
                self._leases_now.load(sid, self._lease_rows[sid])
        else:
            locked = None
            if cluster and touched:
                locked = pg.execute(
                    "select id, version from session where id = any(%s) order by id for update",
                    [touched],
                )
            clock = any(map(needs_clock, operations))
            lease_reads = pg_lock_leases(pg, leased, clock=clock) if leased else None
            if locked is not None or lease_reads is not None:
                self._sync()  # the first round trip: BEGIN, the locks, the clock
            self._leases_now = pg_lease_table(lease_reads) if lease_reads else LeaseTable()
            if locked is not None:
                self._revalidated(touched, locked.fetchall())
        batch = WriteBatch(self)
        self._prefetch([a.message_id for a in map(_admission, operations) if a and not a.fresh])
        outcomes = [self._plan(batch, op) for op in operations]
        self._absent.clear()
        lost = next((o.error for o in outcomes if isinstance(o.error, psycopg.Error)), None)
        if lost is not None:  # a read while planning failed: the connection, not a command
            raise lost
        if optimistic:
            expect_versions(pg, {sid: self._versions[sid] or 0 for sid in touched})
            if leased:
                pg_expect_leases(pg, {sid: self._lease_rows[sid] for sid in leased})
        expiries = pg_write_leases(pg, self._leases_now, relative=optimistic)
        bumped = None
        if batch.events or batch.epochs or batch.approvals or batch.records:
            write_rows(pg, batch.rows())
            if cluster:
                written = sorted({e.aggregate_id for e in batch.events} | set(batch.epochs))
                cursor = pg.execute(
                    "update session set version = version + 1 where id = any(%s) "
                    "returning id, version",
                    [written],
                )
                bumped = (cursor, written)
                notify(pg, self.owner or "", batch.events)
        return batch, outcomes, bumped, expiries

    def _unchanged(
        self, operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        touched: list[str], leased: list[str],
    ) -> bool:  # fmt: skip
        """Whether a cluster batch may be planned on the caches and written in one round
        trip, its checks that they are current sent before its writes
        (``expect_versions``, ``pg_expect_leases``): every session it names exists at a
        version its caches are from, every lease it names is one this store last read or
        wrote, it acquires none (an acquisition compares expiries: the server's clock) and
        plans nothing but commands. A check that fails rolls it back; it is then planned
        again under the locks."""
        return (
            self.owner is not None
            and all(self._versions.get(sid) is not None for sid in touched)
            and all(sid in self._lease_rows for sid in leased)
            and all(isinstance(op, Command) for op in operations)
            and not any(isinstance(op, AcquireLease) for op in operations)
        )

    def _kept_leases(
        self, table: LeaseTable | None, leased: list[str],
        expiries: dict[str, psycopg.Cursor[Any]],
        operations: Sequence[Command[Any] | Callable[[WriteBatch], Any]],
        outcomes: list[Outcome],
    ) -> None:  # fmt: skip
        """After a commit: remember the lease rows the batch read or wrote (*table*: a
        cluster store's next batch may plan on them), with the expiries the server set,
        which the answers of its renewals and parks carry too."""
        if table is None or self.owner is None:
            return
        at: dict[str, int] = {}
        for sid, cursor in expiries.items():
            row = cursor.fetchone()
            if row is not None:
                at[sid] = int(row[0])
        for sid in leased:
            row = table.row(sid)
            if row is None:
                continue
            if sid in at:
                row = msgspec.structs.replace(row, expires_at_ms=at[sid])
            self._lease_rows[sid] = row
            self._lease_rows.move_to_end(sid)
        while len(self._lease_rows) > _KNOWN:
            self._lease_rows.popitem(last=False)
        if not at:
            return
        for i, (op, outcome) in enumerate(zip(operations, outcomes, strict=True)):
            lease = outcome.value
            if isinstance(op, (RenewLease, ParkLease)) and isinstance(lease, Lease):
                if op.session_id in at:
                    expires = at[op.session_id]
                    outcomes[i] = Outcome(
                        value=msgspec.structs.replace(lease, expires_at_ms=expires)
                    )

    def _forget_leases(self, session_ids: Sequence[str]) -> None:
        for session_id in session_ids:
            self._lease_rows.pop(session_id, None)

    @contextmanager
    def _transaction(self, *, soft: bool) -> Iterator[None]:
        """A batch's transaction in pipeline mode: ``begin`` leaves with the batch's first
        round trip and ``commit`` with its last (the pipeline's closing sync), so the
        transaction costs no round trip of its own. *soft*: the commit does not wait for
        its WAL flush. Rolled back when anything fails (then re-raised)."""
        pg = self.pg
        try:
            with pg.pipeline() as self._pipeline:
                pg.execute("begin")
                if soft:
                    pg.execute("set local synchronous_commit to off")
                yield
                pg.execute("commit")
        except BaseException:
            if not pg.closed and pg.info.transaction_status != TransactionStatus.IDLE:
                try:  # psycopg's: it also forgets statements the failed pipeline skipped
                    pg.rollback()
                except psycopg.Error as exc:  # the connection is gone: the batch with it
                    _log.warning("rolling back a failed batch failed", exc_info=exc)
            raise
        finally:
            self._pipeline = None

    def _lease_table(self) -> LeaseTable:
        assert self._leases_now is not None, "leases are read in a batch's transaction"
        return self._leases_now

    def _sync(self) -> None:
        """Inside a batch (pipeline mode): send what is queued and wait for the answers,
        ending with a sync so that the server counts the transaction idle meanwhile: a
        worker that stops before its next round trip has its transaction ended after
        ``stalled_transaction_ms`` (its locks freed)."""
        if self._pipeline is not None:
            self._pipeline.sync()

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

    def after_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """Call *callback* at once: every commit was durable when it returned."""
        callback(None)

    def _prefetch(self, message_ids: list[str]) -> None:
        """Look up a batch's message ids in two queries instead of two per operation."""
        wanted = [i for i in message_ids if i not in self._inputs and i not in self._messages]
        if not wanted:
            return
        pg = self.pg
        found: set[str] = set()
        inputs = pg.execute(
            "select id, session_id, prompt, delivery, admitted_seq, time_created, promoted_seq "
            "from session_input where id = any(%s)",
            [wanted],
        )
        messages = pg.execute(
            "select id, session_id, seq, data from session_message where id = any(%s)", [wanted]
        )
        self._sync()
        for row in inputs.fetchall():
            if row[1] not in self._deleted:
                self._cache(self._inputs, row[0], input_from_row(row), CACHE_MESSAGES)
                found.add(row[0])
        for row in messages.fetchall():
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
            wal_lsn=int(row[1]), version_checks=self.version_checks,
        )  # fmt: skip

    def checkpoint_and_backup(self) -> int:
        """Backups of a PostgreSQL store are the server's (``pg_basebackup``, WAL
        archiving); answer the WAL position every commit so far is durable in."""
        row = self.pg.execute("select (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")
        found = row.fetchone()
        return int(found[0]) if found else 0


def _versions(bumped: _Bump | None) -> dict[str, int | None]:
    """The version of each session a committed batch wrote (None: it deleted it)."""
    if bumped is None:
        return {}
    cursor, written = bumped
    found: dict[str, int | None] = {str(r[0]): int(r[1]) for r in cursor.fetchall()}
    return {sid: found.get(sid) for sid in written}


def _admission(op: object) -> AdmitPrompt | None:
    if isinstance(op, AdmitAndOpen):
        return op.admit
    return op if isinstance(op, AdmitPrompt) else None
