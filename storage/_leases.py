"""Leased ownership of sessions: the lease commands, ``LeaseOf``/``Orphans``, fencing.

A lease names the one owner that drives a session until ``expires_at``; its token grows
by one at every acquisition. A command carrying ``fence`` (the token it is written
under) is refused with ``LeaseLost``, writing nothing, unless the session's lease still
has that token and is neither released nor parked.

A holder whose drains went idle *parks* its lease (``ParkLease``) instead of releasing
it: parked, it expires after the idle time and any owner may acquire it at once (a clean
hand-over, not a takeover), yet its holder takes it back with ``RenewLease`` under the
same token while nobody did, so a busy session is not acquired again for every prompt.
A park finds input pending (admitted while the holder drove) and leaves the lease unparked:
that input is the holder's to drive.

One set of rules, :class:`LeaseTable`, on two kinds of rows:

- the DuckDB store's: in memory, on the store's clock (a callable answering milliseconds;
  monotonic by default, a test's own clock in tests). One process holds a DuckDB store,
  so its leases end with it;
- the PostgreSQL store's: a ``session_lease`` row per session. A batch locks the rows
  of the sessions its lease and fenced commands name (``for update``, with PostgreSQL's
  clock read once the locks are held: never a worker's; :func:`pg_lock_leases`), runs
  the same rules on them in a table of its own (:func:`pg_lease_table`), and writes the
  rows they changed in its transaction (:func:`pg_write_leases`). The lock holds until the batch commits, so an
  acquisition waits for a fenced batch in flight and a fenced batch after an
  acquisition sees the new token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from storage._port import (
    AcquireLease,
    AdmitAndOpen,
    AppendWithPending,
    Command,
    Lease,
    LeaseLost,
    ParkLease,
    ReleaseLease,
    RenewLease,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "LEASE_COMMANDS",
    "LEASE_PARKED_SCHEMA",
    "LEASE_SCHEMA",
    "LeaseRow",
    "LeaseTable",
    "leased_session",
    "monotonic_ms",
    "needs_clock",
    "pg_lease_answers",
    "pg_lease_table",
    "pg_expect_leases",
    "pg_leases_of",
    "pg_lock_leases",
    "pg_orphans",
    "pg_write_leases",
    "session_of",
]

LEASE_COMMANDS: Final = (AcquireLease, RenewLease, ReleaseLease, ParkLease)

LEASE_SCHEMA: Final = [
    """create table session_lease (
        session_id text primary key,
        owner text not null,
        token bigint not null,
        expires_at timestamptz not null,
        released boolean not null default false)""",
    "alter table session add column version bigint not null default 0",
]
"""Schema version 2 of the PostgreSQL store: leases, and the per-session version every
cluster batch that writes a session bumps (``storage._postgres``)."""

LEASE_PARKED_SCHEMA: Final = [
    "alter table session_lease add column parked boolean not null default false",
]
"""Schema version 3: a lease its holder parked while idle (see the module docstring)."""

_EXPIRY: Final = "(extract(epoch from expires_at) * 1000)::bigint"
_LEASE: Final = f"session_id, owner, token, {_EXPIRY}, parked"


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def session_of(op: object) -> str | None:
    """The session a command or query is about, if it names one."""
    sid = getattr(op, "session_id", None)
    if isinstance(sid, str):
        return sid
    for field in ("admit", "asked", "replied", "row"):
        inner = getattr(op, field, None)
        sid = getattr(inner, "session_id", None)
        if isinstance(sid, str):
            return sid
    info = getattr(op, "info", None)
    sid = getattr(info, "id", None)
    return sid if isinstance(sid, str) else None


def needs_clock(op: object) -> bool:
    """Whether *op* runs a lease command (the rules compare or set expiries)."""
    return (
        isinstance(op, LEASE_COMMANDS)
        or (isinstance(op, AdmitAndOpen) and op.lease is not None)
        or (isinstance(op, AppendWithPending) and op.park is not None)
    )


def leased_session(op: object) -> str | None:
    """The session whose lease *op* reads or writes (a lease command, a fenced write, an
    admission that opens under a lease), else None."""
    if isinstance(op, LEASE_COMMANDS):
        return op.session_id
    if isinstance(op, AdmitAndOpen):
        return op.admit.session_id if op.lease is not None else None
    return session_of(op) if getattr(op, "fence", None) is not None else None


class LeaseRow(msgspec.Struct):
    """One session's lease."""

    owner: str
    token: int
    expires_at_ms: int
    released: bool = False
    parked: bool = False


class LeaseTable:
    """The rules of leases over rows in memory, on *clock* (milliseconds).

    The DuckDB store keeps one for its life; a PostgreSQL batch fills one with the rows
    it locked (:meth:`load`) and writes back those :attr:`changed` names.
    """

    def __init__(self, clock: Callable[[], int] = monotonic_ms) -> None:
        self._clock = clock
        self._rows: dict[str, LeaseRow] = {}
        self._loaded: set[str] = set()
        self.changed: set[str] = set()
        """Sessions whose row a command changed (since the table was made)."""
        self.timed: set[str] = set()
        """Changed rows whose expiry a command set from the clock: with a clock of 0,
        expiries relative to the write (``pg_write_leases(relative=True)``)."""

    def load(self, session_id: str, row: LeaseRow) -> None:
        """Hold *row* as the session's lease (read from where the rows are kept)."""
        self._rows[session_id] = row
        self._loaded.add(session_id)

    def loaded(self, session_id: str) -> bool:
        """Whether the session's row was loaded (it exists where the rows are kept)."""
        return session_id in self._loaded

    def row(self, session_id: str) -> LeaseRow | None:
        return self._rows.get(session_id)

    def run(self, op: Command[Any], pending: Callable[[str], bool]) -> Lease | None:
        """Carry out a lease command; its answer. *pending* tells whether a session has
        unpromoted input (a park leaves the lease unparked then)."""
        now = self._clock()
        sid: str = op.session_id  # type: ignore[attr-defined]
        row = self._rows.get(sid)
        if isinstance(op, AcquireLease):
            busy = row is not None and not (row.released or row.parked or row.expires_at_ms < now)
            if busy and row is not None and row.owner != op.owner:
                return None
            token = 1 if row is None else row.token + 1
            taken_over = row is not None and not (row.released or row.parked)
            self._put(sid, LeaseRow(op.owner, token, now + op.ttl_ms), timed=True)
            return self._lease(sid, taken_over=taken_over)
        if row is None or row.released or (row.owner, row.token) != (op.owner, op.token):  # type: ignore[attr-defined]
            return None
        if isinstance(op, RenewLease):
            self._put(sid, LeaseRow(row.owner, row.token, now + op.ttl_ms), timed=True)
            return self._lease(sid)
        if isinstance(op, ParkLease):
            if not pending(sid):
                row = LeaseRow(row.owner, row.token, now + op.idle_ms, parked=True)
                self._put(sid, row, timed=True)
            elif row.parked:
                self._put(sid, LeaseRow(row.owner, row.token, row.expires_at_ms))
            return self._lease(sid)
        assert isinstance(op, ReleaseLease)
        self._put(sid, LeaseRow(row.owner, row.token, row.expires_at_ms, released=True))
        return None

    def _put(self, session_id: str, row: LeaseRow, *, timed: bool = False) -> None:
        self._rows[session_id] = row
        self.changed.add(session_id)
        if timed:
            self.timed.add(session_id)
        else:
            self.timed.discard(session_id)

    def live(self, session_id: str) -> Lease | None:
        """The session's lease when held (parked or not) and unexpired."""
        row = self._rows.get(session_id)
        if row is None or row.released or row.expires_at_ms < self._clock():
            return None
        return self._lease(session_id)

    def expired(self) -> list[str]:
        """Sessions whose lease expired unreleased and unparked (its holder stopped
        driving)."""
        now = self._clock()
        return sorted(
            s
            for s, r in self._rows.items()
            if not (r.released or r.parked) and r.expires_at_ms < now
        )

    def check(self, session_id: str | None, fence: int) -> None:
        """Raise ``LeaseLost`` unless *fence* is the session's lease token, neither
        released nor parked."""
        row = self._rows.get(session_id or "")
        if row is None or row.released or row.parked or row.token != fence:
            raise _lost(session_id, fence, None if row is None else row.token)

    def _lease(self, session_id: str, *, taken_over: bool = False) -> Lease:
        row = self._rows[session_id]
        return Lease(
            session_id=session_id, owner=row.owner, token=row.token,
            expires_at_ms=row.expires_at_ms, taken_over=taken_over, parked=row.parked,
        )  # fmt: skip


_LeaseReads = tuple["psycopg.Cursor[Any]", "psycopg.Cursor[Any] | None"]


def pg_lock_leases(
    pg: psycopg.Connection[Any], session_ids: Sequence[str], *, clock: bool
) -> _LeaseReads:
    """Send the reads that lock the lease rows of *session_ids* until the transaction ends
    (in id order) and, with *clock* (a lease command will run), then read PostgreSQL's
    clock (once the locks are held). The caller reads their answers with
    :func:`pg_lease_table` once the server answered them (the connection pipelines them
    with the rest of the batch's first round trip)."""
    rows = pg.execute(
        "select session_id, owner, token, (extract(epoch from expires_at) * 1000)::bigint, "
        "released, parked from session_lease where session_id = any(%s) "
        "order by session_id for update",
        [sorted(session_ids)],
    )
    if not clock:
        return rows, None
    return rows, pg.execute("select (extract(epoch from clock_timestamp()) * 1000)::bigint")


def pg_lease_table(reads: _LeaseReads) -> LeaseTable:
    """The lease rows :func:`pg_lock_leases` read, in a table on the server's clock (a
    fence check needs no clock)."""
    rows, clock = reads
    now_row = clock.fetchone() if clock is not None else None
    now = int(now_row[0]) if now_row else 0
    table = LeaseTable(lambda: now)
    for r in rows.fetchall():
        table.load(str(r[0]), LeaseRow(str(r[1]), int(r[2]), int(r[3]), bool(r[4]), bool(r[5])))
    return table


def pg_expect_leases(pg: psycopg.Connection[Any], rows: dict[str, LeaseRow]) -> None:
    """Send, in the open transaction, the check that each session's lease is still the row
    in *rows* (its owner, token, released and parked; not its expiry): it locks them (in
    id order) until the transaction ends, or fails with ``storage._pg_schema.STALE``."""
    ids = sorted(rows)
    pg.execute(
        "select kittiwake_expect(count(*) = %s) from (select 1 from session_lease l "
        "join unnest(%s::text[], %s::text[], %s::bigint[], %s::boolean[], %s::boolean[]) "
        "e(session_id, owner, token, released, parked) on l.session_id = e.session_id "
        "and l.owner = e.owner and l.token = e.token and l.released = e.released "
        "and l.parked = e.parked order by l.session_id for update of l) locked",
        [
            len(ids), ids, [rows[i].owner for i in ids], [rows[i].token for i in ids],
            [rows[i].released for i in ids], [rows[i].parked for i in ids],
        ],
    )  # fmt: skip


def pg_write_leases(
    pg: psycopg.Connection[Any], table: LeaseTable, *, relative: bool = False
) -> dict[str, psycopg.Cursor[Any]]:
    """Write the rows *table*'s commands changed, in the open transaction. A row that was
    not there when the batch locked the others is inserted, not upserted: another batch
    creating the same lease meanwhile fails this one on the key (planned again, it finds
    that lease). With *relative* (a table on a clock of 0), a row whose expiry a command
    set from the clock expires that long after the server's clock at the write: answers
    the cursor of each, which reads its expiry (milliseconds) once committed."""
    rows = [(sid, row) for sid in sorted(table.changed) if (row := table.row(sid)) is not None]
    new = [(sid, r) for sid, r in rows if not table.loaded(sid)]
    old = [(sid, r) for sid, r in rows if table.loaded(sid)]
    timed = {sid: r for sid, r in old if relative and sid in table.timed}
    expiries: dict[str, psycopg.Cursor[Any]] = {}
    for sid, r in timed.items():
        expiries[sid] = pg.execute(
            "update session_lease set owner = %s, token = %s, "
            "expires_at = clock_timestamp() + %s * interval '1 ms', released = %s, "
            f"parked = %s where session_id = %s returning {_EXPIRY}",
            [r.owner, r.token, r.expires_at_ms, r.released, r.parked, sid],
        )
    old = [(sid, r) for sid, r in old if sid not in timed]
    with pg.cursor() as cursor:
        if new:
            assert not relative, "a row inserted needs the server's clock"
            cursor.executemany(
                "insert into session_lease values (%s, %s, %s, to_timestamp(%s / 1000.0), %s, %s)",
                [(sid, r.owner, r.token, r.expires_at_ms, r.released, r.parked) for sid, r in new],
            )
        if old:
            cursor.executemany(
                "update session_lease set owner = %s, token = %s, "
                "expires_at = to_timestamp(%s / 1000.0), released = %s, parked = %s "
                "where session_id = %s",
                [(r.owner, r.token, r.expires_at_ms, r.released, r.parked, sid) for sid, r in old],
            )
    return expiries


def pg_leases_of(pg: psycopg.Connection[Any], session_ids: Sequence[str]) -> psycopg.Cursor[Any]:
    """Send the read of the live leases (held or parked, unexpired) of *session_ids*; read
    the answer with :func:`pg_lease_answers` (the caller may pipeline it with others)."""
    return pg.execute(
        f"select {_LEASE} from session_lease where session_id = any(%s) and not released "
        "and expires_at >= now()",
        [sorted(session_ids)],
    )


def pg_lease_answers(
    cursor: psycopg.Cursor[Any], session_ids: Sequence[str]
) -> dict[str, Lease | None]:
    """The live lease of each of *session_ids* (None: none) that :func:`pg_leases_of` read."""
    found: dict[str, Lease | None] = dict.fromkeys(session_ids)
    for row in cursor.fetchall():
        found[str(row[0])] = _pg_lease(row)
    return found


def pg_orphans(pg: psycopg.Connection[Any], limit: int) -> list[str]:
    rows = pg.execute(
        "select session_id from ("
        " select distinct i.session_id from session_input i"
        " left join session_lease l on l.session_id = i.session_id"
        " where i.promoted_seq is null and (l.session_id is null or l.released or l.parked"
        "  or l.expires_at < now())"
        " union select session_id from session_lease"
        "  where not released and not parked and expires_at < now()"
        ") o where exists (select 1 from session s where s.id = o.session_id) "
        "order by session_id limit %s",
        [limit],
    ).fetchall()
    return [str(r[0]) for r in rows]


def _lost(session_id: str | None, fence: int, current: int | None) -> LeaseLost:
    now = "none" if current is None else f"token {current}"
    return LeaseLost(f"the lease of {session_id} is no longer token {fence} (now {now})")


def _pg_lease(row: Sequence[Any]) -> Lease:
    return Lease(
        session_id=str(row[0]), owner=str(row[1]), token=int(row[2]),
        expires_at_ms=int(row[3]), parked=bool(row[4]),
    )  # fmt: skip
