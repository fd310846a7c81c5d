"""A cluster store's caches, validated per session (``storage._postgres``, ``owner=``).

Other workers write the same database, so a cluster store remembers the version of each
session its caches are from (the ``session.version`` column every batch that writes a
session bumps) and indexes its cached keys by session. A batch compares the versions of
the sessions it touches under their locks; a read compares its session's version first
(the reads answered together, in one query); a session another worker wrote since has
everything cached of it dropped and read again. Reads by message or request id read
through; ``LeaseOf`` and ``Orphans`` are SQL.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final, TypeVar

import psycopg

from runtime import StorageError
from storage._caches import CACHE_MESSAGES
from storage._leases import pg_lease_answers, pg_leases_of, pg_orphans, session_of
from storage._pg_queries import PostgresQueries
from storage._pipeline import Outcome
from storage._port import (
    AdmittedInput,
    IsApproved,
    Lease,
    LeaseOf,
    MessageEntry,
    Orphans,
    Permission,
    Query,
)

__all__ = ["ClusterCaches"]

T = TypeVar("T")
_INDEX_REBUILD: Final = 8 * CACHE_MESSAGES
"""Keys indexed since the index was rebuilt from the caches (evicted keys linger)."""
_KNOWN: Final = 65536
"""Sessions whose version a cluster store remembers; one forgotten has its caches dropped
and re-read the next time it is touched."""
_VERSIONS: Final = "select id, version from session where id = any(%s) order by id"
_BY_ID: Final = (MessageEntry, AdmittedInput, Permission, IsApproved)
"""Queries a cluster store answers by reading through (by message or request id)."""
_UNLOCKED: Final = (LeaseOf, Orphans)
"""Queries of a cluster store answered by SQL with no cache to revalidate."""


class ClusterCaches(PostgresQueries):
    """The PostgreSQL store's reads and caches, validated per session in cluster mode."""

    owner: str | None
    """The worker this store writes for (cluster mode), or None: the one process."""
    _versions: OrderedDict[str, int | None]
    """Cluster mode: the version of each session this store's caches are from."""
    _keys: dict[str, set[str]]
    """Cluster mode: the keys each session has in the keyed caches (``_cache``)."""
    _indexed: int
    _leases_read: dict[str, Lease | None] | None
    """``LeaseOf`` answers of a batch of reads read together (``answer_many``)."""
    _fresh_reads: bool
    """Reads answered right after a batch (``then``) need no revalidation: the batch
    held its sessions' locks until it committed."""
    version_checks: int
    """Cluster mode: round trips reads made to compare their sessions' versions with the
    server's (one for the reads answered together); ``PostgresStatistics`` reports it."""

    def _validate(self, owner: str | None) -> None:
        """Set up the validation state (empty) of a store opened for *owner*."""
        self.owner = owner
        self._versions = OrderedDict()
        self._keys = {}
        self._indexed = 0
        self._leases_read = None
        self._fresh_reads = False
        self.version_checks = 0

    def _revalidate(self, session_ids: Sequence[str]) -> None:
        """Drop the cached state of every session another worker wrote since this store's
        caches were filled."""
        ids = sorted(set(session_ids))
        self.version_checks += 1
        self._revalidated(ids, self.pg.execute(_VERSIONS, [ids]).fetchall())

    def _revalidated(self, session_ids: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Compare the versions *rows* read of *session_ids* with the caches'; drop what
        another worker changed."""
        found: dict[str, int | None] = {str(r[0]): int(r[1]) for r in rows}
        for session_id in session_ids:
            version = found.get(session_id)
            if self._versions.get(session_id, -1) != version:
                self._drop([session_id])
            self._saw({session_id: version})

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

    def lease_of(self, session_id: str) -> Lease | None:
        if self._leases_read is not None and session_id in self._leases_read:
            return self._leases_read[session_id]
        return pg_lease_answers(pg_leases_of(self.pg, [session_id]), [session_id])[session_id]

    def orphans(self, limit: int) -> list[str]:
        return pg_orphans(self.pg, limit)

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

    def answer_many(self, queries: Sequence[Query[Any]]) -> list[Outcome]:
        """Answer a batch's reads; a cluster store first revalidates the sessions they read
        and reads the leases they ask for (``LeaseOf``), in one round trip, not one per
        read."""
        if self.owner is None:
            return super().answer_many(queries)
        ids = sorted({
            sid for q in queries
            if not isinstance(q, _BY_ID + _UNLOCKED) and (sid := session_of(q)) is not None
        })  # fmt: skip
        leased = sorted({q.session_id for q in queries if isinstance(q, LeaseOf)})
        pg = self.pg
        try:
            with pg.pipeline():
                versions = pg.execute(_VERSIONS, [ids]) if ids else None
                leases = pg_leases_of(pg, leased) if leased else None
            if versions is not None:
                self.version_checks += 1
                self._revalidated(ids, versions.fetchall())
            if leases is not None:
                self._leases_read = pg_lease_answers(leases, leased)
        except psycopg.Error as exc:
            self.broken = True
            error = StorageError(f"PostgreSQL read failed: {exc}")
            error.__cause__ = exc
            return [Outcome(error=error) for _ in queries]
        self._fresh_reads = True
        try:
            return super().answer_many(queries)
        finally:
            self._fresh_reads, self._leases_read = False, None

    def _read_through(self, query: Query[Any]) -> None:
        """Cluster mode: drop what *query* would answer from a cache another worker may
        have changed (a session's state when its version moved; by id: always)."""
        if isinstance(query, MessageEntry):
            self._messages.pop(query.message_id, None)
        elif isinstance(query, AdmittedInput):
            self._inputs.pop(query.message_id, None)
        elif isinstance(query, Permission):
            self._permissions.pop(query.request_id, None)
        elif isinstance(query, IsApproved):
            self._approvals = None
        elif isinstance(query, _UNLOCKED) or self._fresh_reads:
            return
        elif (session_id := session_of(query)) is not None:
            self._revalidate([session_id])
