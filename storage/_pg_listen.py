"""Commit notifications between PostgreSQL stores on one database (cluster mode).

A cluster store's batch that appended events sends, in its own transaction, one
``pg_notify('kittiwake', ...)`` whose payload is its owner then a line ``<session> <first
seq> <last seq>`` per session it appended to (more than one notification only when the
lines pass PostgreSQL's 8000-byte payload limit); PostgreSQL delivers them when (and only
if) the transaction commits, in commit order. A :class:`Listener` (a connection of its own, blocking: run it on a
thread) hands on the other owners' notifications: this worker's own commits already
reach its event hub through its StorageActor. A notification says "events up to this
seq are committed": a reader catches up by seq (``Events``) and never trusts the
notification for the events themselves, so a notification lost with a listener's
connection costs latency, not data, once the reader reads again.

:func:`listen` runs a Listener for trio: it hands ``(session_id, first_seq, last_seq)``
to a bounded memory channel, merging per session what does not fit while the consumer
is behind (so nothing is dropped and the backlog is bounded by the number of sessions),
and reconnects when the connection is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import psycopg
import trio

from storage._batch import StoredEvent

__all__ = ["CHANNEL", "Listener", "listen", "notify"]

CHANNEL: Final = "kittiwake"
_log = logging.getLogger("kittiwake.storage")
_PAYLOAD_LIMIT: Final = 7900
"""Bytes of one notification's payload at most (PostgreSQL refuses more than 8000)."""
_BEHIND_POLL: Final = 0.02
"""Seconds between attempts to hand on a backlog while the consumer is behind."""


def notify(pg: psycopg.Connection[Any], owner: str, events: Sequence[StoredEvent]) -> None:
    """Notify, in the open transaction, the sessions *events* append to: one notification
    for the batch (one per ``_PAYLOAD_LIMIT`` bytes of lines)."""
    spans: dict[str, tuple[int, int]] = {}
    for event in events:
        first, last = spans.get(event.aggregate_id, (event.seq, event.seq))
        spans[event.aggregate_id] = (min(first, event.seq), max(last, event.seq))
    payloads: list[str] = []
    payload, size = owner, len(owner.encode())
    for sid, (first, last) in spans.items():
        line = f"\n{sid} {first} {last}"
        if payload != owner and size + len(line.encode()) > _PAYLOAD_LIMIT:
            payloads.append(payload)
            payload, size = owner, len(owner.encode())
        payload += line
        size += len(line.encode())
    if payload != owner:
        payloads.append(payload)
    for each in payloads:
        pg.execute("select pg_notify(%s, %s)", [CHANNEL, each])


class Listener:
    """Other owners' commit notifications, on a connection of its own.

    Blocking: call :meth:`wait` on a thread (``trio.to_thread.run_sync``), or wait for
    :meth:`fileno` to be readable and take what arrived with :meth:`ready` (which never
    blocks); :meth:`close` ends it. Opening raises ``psycopg.Error`` when the server cannot
    be reached.
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
        return out + self.ready()

    def ready(self) -> list[tuple[str, int, int]]:
        """The notifications that have arrived, without waiting (as :meth:`wait`).

        Raises psycopg.Error when the connection is lost.
        """
        out: list[tuple[str, int, int]] = []
        for n in self._conn.notifies(timeout=0.0):
            out += self._parse(n.payload)
        return out

    def fileno(self) -> int:
        """The connection's socket: readable when something arrived."""
        return self._conn.fileno()

    def _parse(self, payload: str) -> list[tuple[str, int, int]]:
        owner, *lines = payload.split("\n")
        if owner == self._owner:
            return []
        out: list[tuple[str, int, int]] = []
        for line in lines:
            sid, first, last = line.rsplit(" ", 2)
            out.append((sid, int(first), int(last)))
        return out

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        self._conn.close()


async def listen(
    url: str, owner: str, send: trio.MemorySendChannel[tuple[str, int, int]], *,
    poll: float = 0.5, reconnect_after: float = 1.0,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:  # fmt: skip
    """Hand other owners' commit notifications to *send* until cancelled.

    Started with ``nursery.start``, it returns once listening: a commit made after that
    is handed on. The connection is opened on a worker thread; then this task waits for
    its socket to be readable (at most *poll* seconds at a time, so a lost connection is
    noticed) and takes what arrived without blocking, with no thread per notification.
    Cancellation ends it at once (``trio.Cancelled`` propagates; the connection is
    closed). When *send* is full, notifications are merged per session
    (first seq the lowest, last the highest) and handed on as room appears: none is
    dropped. A lost connection (or a failed connect) is logged and opened again after
    *reconnect_after* seconds; notifications sent meanwhile are lost, so a consumer
    catches up by reading (streams by seq, a sweep for pending work). A closed *send*
    ends the call.
    """
    backlog: dict[str, tuple[int, int]] = {}
    started = False
    while True:
        try:
            listener = await trio.to_thread.run_sync(Listener, url, owner)
        except psycopg.Error as exc:
            _log.warning("notification listener did not connect", exc_info=exc)
            await trio.sleep(reconnect_after)
            continue
        try:
            if not started:
                started = True
                task_status.started()
            while True:
                arrived = listener.ready()
                if arrived:
                    await trio.lowlevel.checkpoint()
                else:
                    with trio.move_on_after(_BEHIND_POLL if backlog else poll):
                        await trio.lowlevel.wait_readable(listener.fileno())
                    arrived = listener.ready()
                for sid, first, last in arrived:
                    old = backlog.get(sid)
                    backlog[sid] = (first, last) if old is None else (
                        min(old[0], first), max(old[1], last)
                    )  # fmt: skip
                while backlog:
                    sid, (first, last) = next(iter(backlog.items()))
                    try:
                        send.send_nowait((sid, first, last))
                    except trio.WouldBlock:
                        break
                    except (trio.ClosedResourceError, trio.BrokenResourceError):
                        return
                    del backlog[sid]
        except psycopg.Error as exc:
            _log.warning("notification listener lost its connection", exc_info=exc)
        finally:
            listener.close()
        await trio.sleep(reconnect_after)
