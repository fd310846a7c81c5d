"""The DuckDB store's write pipeline: plan a batch of commands, journal it, answer its
callers once the journal's fdatasync covers it (on the sync worker with
``sync_thread``), then hand its rows to the applier worker, which writes them into
DuckDB off the commit path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec

from runtime import StorageError
from storage._backup import write_backup
from storage._batch import ApprovalRow, EpochRow, StoredEvent, WriteBatch
from storage._caches import (
    CACHE_HISTORIES,
    CACHE_MESSAGES,
    StoreCaches,
    decode_message,
    input_from_row,
)
from storage._commands import apply
from storage._leases import LEASE_COMMANDS, LeaseTable, session_of
from storage._port import AdmitAndOpen, AdmitPrompt, AppendWithPending, Command, LeaseLost
from storage._records import RecordRow
from storage._rows import RowSet
from storage._state import DB_FILE
from storage._telemetry_options import batch_span, end_batch_span

__all__ = ["JournalRecord", "Outcome", "WritePipeline", "decode_record", "encode_record"]

_log = logging.getLogger("kittiwake.storage")


class JournalRecord(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One committed batch as the journal keeps it."""

    events: list[StoredEvent]
    epochs: list[EpochRow] = []
    approvals: list[ApprovalRow] = []
    records: list[RecordRow] = []


encode_record = msgspec.msgpack.Encoder().encode
decode_record = msgspec.msgpack.Decoder(JournalRecord).decode


class Outcome(msgspec.Struct, frozen=True):
    """What one operation of a batch produced: a value, or the error it raised."""

    value: Any = None
    error: BaseException | None = None


class WritePipeline(StoreCaches):
    """The writes of :class:`EventStore`; see the module docstring."""

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
        is then broken and must be reopened, which rescans the journal); the batch's
        events are noted in ``in_doubt``, since its pages may have reached the file. If the
        DuckDB transaction fails after the journal append, StorageError is raised
        and the store must be reopened (the journal keeps the batch).
        """
        self._check_applier()
        batch = WriteBatch(self)
        self._prefetch([a.message_id for a in map(_admission, operations) if a and not a.fresh])
        outcomes = [self._plan(batch, op) for op in operations]
        self._absent.clear()
        if batch.events or batch.epochs or batch.approvals or batch.records:
            started = time.perf_counter()
            span = batch_span(len(operations), len(batch.events))
            try:
                lsn = self._append_journal(batch, sync=False)
            except Exception as exc:
                end_batch_span(span, started, error=exc)
                return self._journal_failed(exc, len(operations), on_durable, batch.events)
            journaled = time.perf_counter()
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
                    end_batch_span(span, started, journaled, error=error)
                    self._journal_failed(error, len(operations), on_durable, batch.events)
                    return
                if on_durable is not None:
                    on_durable(outcomes, batch.events)
                self._apply_later(batch, lsn)
                self._last_commit_ms = (time.perf_counter() - started) * 1000
                end_batch_span(span, started, journaled, fsync_ms=self._last_sync_ms())

            if self._syncer is not None:
                self._syncer.submit(complete)
            else:
                try:
                    self._sync_journal()
                except Exception as exc:
                    return self._journal_failed(exc, len(operations), on_durable, batch.events)
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
        events: list[StoredEvent],
    ) -> tuple[list[Outcome], list[StoredEvent]]:
        self.broken = True
        self.in_doubt.extend((e.aggregate_id, e.seq) for e in events)
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
            self._cache(self._inputs, row[0], input_from_row(row), CACHE_MESSAGES)
            found.add(row[0])
        for row in self.conn.execute(
            "select id, session_id, seq, data from session_message where id in (select unnest(?))",
            [wanted],
        ).fetchall():
            if row[1] in self._deleted:
                continue
            entry = (str(row[1]), int(row[2]), decode_message(row[3]))
            self._cache(self._messages, row[0], entry, CACHE_MESSAGES)
            found.add(row[0])
        self._absent.update(set(wanted) - found)

    def _plan(self, batch: WriteBatch, op: Command[Any] | Callable[[WriteBatch], Any]) -> Outcome:
        mark = batch.mark()
        try:
            if isinstance(op, LEASE_COMMANDS):
                return Outcome(value=self._lease_command(op, batch))
            fence = getattr(op, "fence", None)
            if fence is not None:  # LeaseLost before anything of it is planned
                self._lease_table().check(session_of(op), fence)
            value = apply(batch, op) if isinstance(op, Command) else op(batch)
            if isinstance(op, AppendWithPending) and op.park is not None:
                self._lease_command(op.park, batch)  # parks only with nothing pending
            if isinstance(op, AdmitAndOpen) and op.lease is not None:
                # Last: a refused renewal changed nothing, and the rollback drops the rest.
                if self._lease_command(op.lease, batch) is None:
                    raise LeaseLost(
                        f"the lease of {op.lease.session_id} is no longer token "
                        f"{op.lease.token}: not opened"
                    )
            return Outcome(value=value)
        except Exception as exc:  # noqa: BLE001 - the error is the operation's answer
            batch.rollback(mark)
            return Outcome(error=exc)

    def _lease_command(self, op: Command[Any], batch: WriteBatch) -> Any:
        """Carry out a lease command (``storage._leases``) in *batch*: a park sees the
        input it admitted."""
        return self._lease_table().run(op, pending=partial(_has_pending, batch))

    def _lease_table(self) -> LeaseTable:
        """The leases the batch being planned runs on (in memory for DuckDB)."""
        return self._leases

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

    def _append_journal(self, batch: WriteBatch, *, sync: bool = True) -> int:
        assert self._journal is not None
        record = JournalRecord(
            events=batch.events,
            epochs=list(batch.epochs.values()),
            approvals=batch.approvals,
            records=batch.records,
        )
        return self._journal.append([encode_record(record)], sync=sync)

    def _sync_journal(self) -> None:
        assert self._journal is not None
        started = time.perf_counter()
        self._journal.sync()
        self._inline_sync_seconds = time.perf_counter() - started

    def _last_sync_ms(self) -> float:
        """How long the latest fdatasync of the journal took, in milliseconds."""
        if self._syncer is not None:
            return self._syncer.last_sync_seconds * 1000
        return self._inline_sync_seconds * 1000

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
        while len(self._histories) > CACHE_HISTORIES:
            self._histories.popitem(last=False)
        for message_id, (session_id, seq, message) in batch.messages.items():
            history = self._histories.get(session_id)
            if history is not None:
                history.put(message_id, seq, message)
        for session_id, session in batch.sessions.items():
            self._sessions[session_id] = session
        for row in batch.inputs.values():
            self._cache(self._inputs, row.id, row, CACHE_MESSAGES)
        for message_id, entry in batch.messages.items():
            self._cache(self._messages, message_id, entry, CACHE_MESSAGES)
        for session_id, epoch in batch.epochs.items():
            self._epochs[session_id] = epoch
        for session_id in batch.cleared_epochs:
            self._epochs[session_id] = None
        for request_id, info in batch.permissions.items():
            self._cache(self._permissions, request_id, info, CACHE_MESSAGES)
        if self._approvals is not None:
            self._approvals.update((a.project, a.permission, a.resource) for a in batch.approvals)

    def _count(self, operations: int, events: int) -> None:
        self._stats["batches"] += 1
        self._stats["operations"] += operations
        self._stats["events"] += events
        self._stats["last_batch_size"] = operations

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
            journal = self._journal
            self._schedule.failed(journal)
            _log.error(
                "backup failed; the journal keeps growing until one succeeds",
                exc_info=exc,
                extra={
                    "error": f"{type(exc).__name__}: {exc}",
                    "journal_records": journal.held_records,
                    "journal_bytes": journal.held_bytes,
                    "retry_at_records": journal.held_records + self._schedule.batches,
                    "retry_at_bytes": journal.held_bytes + self._schedule.journal_bytes,
                },
            )

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


def _has_pending(batch: WriteBatch, session_id: str) -> bool:
    """Whether the session has unpromoted input, as *batch* sees it (no session: none)."""
    return bool(batch.pending(session_id))


def _admission(op: object) -> AdmitPrompt | None:
    if isinstance(op, AdmitAndOpen):
        return op.admit
    return op if isinstance(op, AdmitPrompt) else None
