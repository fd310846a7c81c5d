"""Leased ownership of sessions: the lease commands, ``LeaseOf``/``Orphans``, fencing.

A lease names the one owner that drives a session until ``expires_at``; its token grows
by one at every acquisition. A command carrying ``fence`` (the token it is written
under) is refused with ``LeaseLost``, writing nothing, unless the session's lease still
has that token and was not released.

Two implementations:

- :class:`LeaseTable`, the DuckDB store's: in memory, on the store's clock (a callable
  answering milliseconds; monotonic by default, a test's own clock in tests). One process
  holds a DuckDB store, so its leases end with it.
- The ``pg_*`` functions, the PostgreSQL store's: a ``session_lease`` row per session,
  read and written inside the batch's transaction on PostgreSQL's clock (``now()``),
  never a worker's. A fence check share-locks the lease row until the batch commits, so
  an acquisition waits for a fenced batch in flight and a fenced batch after an
  acquisition sees the new token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from storage._port import (
    AcquireLease,
    Command,
    Lease,
    LeaseLost,
    ReleaseLease,
    RenewLease,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "LEASE_COMMANDS",
    "LEASE_SCHEMA",
    "LeaseTable",
    "monotonic_ms",
    "pg_check_fence",
    "pg_lease_command",
    "pg_lease_of",
    "pg_orphans",
    "session_of",
]

LEASE_COMMANDS: Final = (AcquireLease, RenewLease, ReleaseLease)

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

_LEASE: Final = "session_id, owner, token, (extract(epoch from expires_at) * 1000)::bigint"


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


class _Row(msgspec.Struct):
    owner: str
    token: int
    expires_at_ms: int
    released: bool = False


class LeaseTable:
    """The DuckDB store's leases (one process), on *clock* (milliseconds)."""

    def __init__(self, clock: Callable[[], int] = monotonic_ms) -> None:
        self._clock = clock
        self._rows: dict[str, _Row] = {}

    def run(self, op: Command[Any]) -> Lease | None:
        """Carry out a lease command; its answer."""
        now = self._clock()
        row = self._rows.get(op.session_id)  # type: ignore[attr-defined]
        if isinstance(op, AcquireLease):
            free = row is None or row.released or row.expires_at_ms < now
            if row is not None and not free and row.owner != op.owner:
                return None
            token = 1 if row is None else row.token + 1
            taken_over = row is not None and not row.released
            self._rows[op.session_id] = _Row(op.owner, token, now + op.ttl_ms)
            return self._lease(op.session_id, taken_over=taken_over)
        if isinstance(op, RenewLease):
            if row is None or row.released or (row.owner, row.token) != (op.owner, op.token):
                return None
            row.expires_at_ms = now + op.ttl_ms
            return self._lease(op.session_id)
        assert isinstance(op, ReleaseLease)
        if row is not None and (row.owner, row.token) == (op.owner, op.token):
            row.released = True
        return None

    def live(self, session_id: str) -> Lease | None:
        """The session's lease when held and unexpired."""
        row = self._rows.get(session_id)
        if row is None or row.released or row.expires_at_ms < self._clock():
            return None
        return self._lease(session_id)

    def expired(self) -> list[str]:
        """Sessions whose lease expired unreleased (its holder stopped driving)."""
        now = self._clock()
        return sorted(s for s, r in self._rows.items() if not r.released and r.expires_at_ms < now)

    def check(self, session_id: str | None, fence: int) -> None:
        """Raise ``LeaseLost`` unless *fence* is the session's unreleased lease token."""
        row = self._rows.get(session_id or "")
        if row is None or row.released or row.token != fence:
            raise _lost(session_id, fence, None if row is None else row.token)

    def _lease(self, session_id: str, *, taken_over: bool = False) -> Lease:
        row = self._rows[session_id]
        return Lease(
            session_id=session_id, owner=row.owner, token=row.token,
            expires_at_ms=row.expires_at_ms, taken_over=taken_over,
        )  # fmt: skip


def pg_lease_command(pg: psycopg.Connection[Any], op: Command[Any]) -> Lease | None:
    """Run a lease command in the open transaction; its answer."""
    if isinstance(op, AcquireLease):
        prev = pg.execute(
            "select owner, token, released, expires_at < now() from session_lease "
            "where session_id = %s for update",
            [op.session_id],
        ).fetchone()
        if prev is not None and not (prev[2] or prev[3] or prev[0] == op.owner):
            return None  # another owner holds it, unexpired
        row = pg.execute(
            "insert into session_lease values (%s, %s, 1, now() + %s * interval '1 ms', false) "
            "on conflict (session_id) do update set owner = excluded.owner, "
            "token = session_lease.token + 1, expires_at = excluded.expires_at, "
            f"released = false returning {_LEASE}",
            [op.session_id, op.owner, op.ttl_ms],
        ).fetchone()
        return _pg_lease(row, taken_over=prev is not None and not prev[2])
    if isinstance(op, RenewLease):
        row = pg.execute(
            "update session_lease set expires_at = now() + %s * interval '1 ms' "
            "where session_id = %s and owner = %s and token = %s and not released "
            f"returning {_LEASE}",
            [op.ttl_ms, op.session_id, op.owner, op.token],
        ).fetchone()
        return None if row is None else _pg_lease(row)
    assert isinstance(op, ReleaseLease)
    pg.execute(
        "update session_lease set released = true "
        "where session_id = %s and owner = %s and token = %s",
        [op.session_id, op.owner, op.token],
    )
    return None


def pg_lease_of(pg: psycopg.Connection[Any], session_id: str) -> Lease | None:
    row = pg.execute(
        f"select {_LEASE} from session_lease where session_id = %s and not released "
        "and expires_at >= now()",
        [session_id],
    ).fetchone()
    return None if row is None else _pg_lease(row)


def pg_orphans(pg: psycopg.Connection[Any], limit: int) -> list[str]:
    rows = pg.execute(
        "select session_id from ("
        " select distinct i.session_id from session_input i"
        " left join session_lease l on l.session_id = i.session_id"
        " where i.promoted_seq is null and (l.session_id is null or l.released"
        "  or l.expires_at < now())"
        " union select session_id from session_lease where not released and expires_at < now()"
        ") o where exists (select 1 from session s where s.id = o.session_id) "
        "order by session_id limit %s",
        [limit],
    ).fetchall()
    return [str(r[0]) for r in rows]


def pg_check_fence(pg: psycopg.Connection[Any], session_id: str | None, fence: int) -> None:
    """Raise ``LeaseLost`` unless *fence* is the session's unreleased lease token now. The
    lease row stays share-locked until the transaction ends: an acquisition waits for it."""
    row = pg.execute(
        "select token, released from session_lease where session_id = %s for share",
        [session_id],
    ).fetchone()
    if row is None or row[1] or int(row[0]) != fence:
        raise _lost(session_id, fence, None if row is None else int(row[0]))


def _lost(session_id: str | None, fence: int, current: int | None) -> LeaseLost:
    now = "none" if current is None else f"token {current}"
    return LeaseLost(f"the lease of {session_id} is no longer token {fence} (now {now})")


def _pg_lease(row: Sequence[Any] | None, *, taken_over: bool = False) -> Lease:
    assert row is not None
    return Lease(
        session_id=str(row[0]), owner=str(row[1]), token=int(row[2]),
        expires_at_ms=int(row[3]), taken_over=taken_over,
    )  # fmt: skip
