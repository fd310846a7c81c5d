"""Commit notifications between PostgreSQL stores on one database (cluster mode).

A cluster store's batch that appended events sends, in its own transaction, one
``pg_notify('kittiwake', '<owner> <session> <first seq> <last seq>')`` per session it
appended to; PostgreSQL delivers them when (and only if) the transaction commits, in
commit order. A :class:`Listener` (a connection of its own, blocking: run it on a
thread) hands on the other owners' notifications: this worker's own commits already
reach its event hub through its StorageActor. A notification says "events up to this
seq are committed": a reader catches up by seq (``Events``) and never trusts the
notification for the events themselves, so a notification lost with a listener's
connection costs latency, not data, once the reader reads again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import psycopg

from storage._batch import StoredEvent

__all__ = ["CHANNEL", "Listener", "notify"]

CHANNEL: Final = "kittiwake"


def notify(pg: psycopg.Connection[Any], owner: str, events: Sequence[StoredEvent]) -> None:
    """Send one notification per session *events* append to, in the open transaction."""
    spans: dict[str, tuple[int, int]] = {}
    for event in events:
        first, last = spans.get(event.aggregate_id, (event.seq, event.seq))
        spans[event.aggregate_id] = (min(first, event.seq), max(last, event.seq))
    if spans:
        with pg.cursor() as cursor:
            cursor.executemany(
                "select pg_notify(%s, %s)",
                [(CHANNEL, f"{owner} {sid} {a} {b}") for sid, (a, b) in spans.items()],
            )


class Listener:
    """Other owners' commit notifications, on a connection of its own.

    Blocking: call :meth:`wait` on a thread (``trio.to_thread.run_sync``); :meth:`close`
    ends it. Opening raises ``psycopg.Error`` when the server cannot be reached.
    """

    def __init__(self, url: str, owner: str, *, connect_timeout: float = 10.0) -> None:
        self._owner = owner
        self._conn = psycopg.connect(
            url, autocommit=True, connect_timeout=max(1, int(connect_timeout))
        )
        self._conn.execute(f"listen {CHANNEL}")

    def wait(self, timeout: float) -> list[tuple[str, int, int]]:
        """The notifications that arrive within *timeout* seconds (returning as soon as
        one does, with those right behind it): ``(session_id, first_seq, last_seq)`` of
        other owners' commits, in commit order; ``[]`` when none came.

        Raises psycopg.Error when the connection is lost (open a new Listener, then
        catch up by reading).
        """
        out: list[tuple[str, int, int]] = []
        for n in self._conn.notifies(timeout=timeout, stop_after=1):
            out += self._parse(n.payload)
        for n in self._conn.notifies(timeout=0.0):
            out += self._parse(n.payload)
        return out

    def _parse(self, payload: str) -> list[tuple[str, int, int]]:
        owner, sid, first, last = payload.rsplit(" ", 3)
        return [] if owner == self._owner else [(sid, int(first), int(last))]

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        self._conn.close()
