"""The lease commands of the storage port on every store (``storage._leases``): held by
one owner, renewed, released, taken over once expired; fenced writes refused under a
replaced, released or parked token; a parked lease taken back by its holder under its
token, or acquired by another owner (not a takeover), after which the holder's renewal,
fenced writes and opening admission are refused; a park that finds input pending leaves
the lease driving, and so does a turn's last write that carries one. DuckDB's leases run on a test clock, PostgreSQL's on its own (the test
waits a short lease out)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from runtime import events as ev
from storage import (
    AcquireLease,
    AdmitAndOpen,
    Append,
    AppendWithPending,
    AskPermission,
    Command,
    CreateSession,
    Epoch,
    Events,
    InitializeEpoch,
    Lease,
    LeaseLost,
    LeaseOf,
    Orphans,
    ParkLease,
    PendingInputs,
    Permission,
    PromoteInputs,
    ReleaseLease,
    RenewLease,
    Store,
)
from tests.storage.test_store_contract import (
    STORES,
    _admit,
    _asked,
    _info,
    _read,
    _runtime_store,
    _write,
)


class _Clock:
    """The DuckDB store's lease clock in a test: milliseconds that pass when told."""

    def __init__(self) -> None:
        self.ms = 1_000

    def __call__(self) -> int:
        return self.ms


_SHORT_TTL = 300
"""A lease that expires in the test: PostgreSQL's clock is real, so the test waits it out."""


@pytest.fixture(params=sorted(STORES))
def lease_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[AbstractAsyncContextManager[Store], Callable[[], Any]]:
    """A store and an async callable that lets a ``_SHORT_TTL`` lease expire on its clock."""
    if request.param.startswith("postgresql"):
        url = request.getfixturevalue("postgres_database")

        async def wait_out() -> None:
            await trio.sleep(_SHORT_TTL / 1e3)

        options = {"owner": "w1"} if request.param == "postgresql-worker" else None
        return _runtime_store(tmp_path, "threaded", url, options), wait_out
    clock = _Clock()

    async def elapse() -> None:
        clock.ms += _SHORT_TTL + 1

    mode = request.param.removeprefix("duckdb-")
    return _runtime_store(tmp_path, mode, store_options={"lease_clock": clock}), elapse


async def test_leases_are_held_by_one_owner_renewed_released_and_taken_over_when_expired(
    lease_store: tuple[AbstractAsyncContextManager[Store], Callable[[], Any]],
) -> None:
    open_store, elapse = lease_store
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        first = await _write(store, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=60_000))
        assert isinstance(first, Lease) and (first.owner, first.taken_over) == ("w1", False)
        assert await _read(store, LeaseOf(session_id="ses_a")) == first
        # Held by another owner, unexpired: refused.
        assert await _write(store, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=1)) is None
        renewed = await _write(
            store, RenewLease(session_id="ses_a", owner="w1", token=first.token, ttl_ms=90_000)
        )
        assert renewed is not None and renewed.token == first.token
        assert renewed.expires_at_ms > first.expires_at_ms
        assert (
            await _write(  # not w2's lease, nor that token
                store, RenewLease(session_id="ses_a", owner="w2", token=first.token, ttl_ms=1)
            )
            is None
        )
        # Released: free for the next owner, with the next token, not a takeover.
        await _write(store, ReleaseLease(session_id="ses_a", owner="w1", token=first.token))
        assert await _read(store, LeaseOf(session_id="ses_a")) is None
        second = await _write(
            store, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=_SHORT_TTL)
        )
        assert second is not None and second.token == first.token + 1 and not second.taken_over
        # Expired unreleased: an orphan, then taken over by w1 with the next token.
        await elapse()
        assert await _read(store, LeaseOf(session_id="ses_a")) is None
        assert await _read(store, Orphans(limit=10)) == ["ses_a"]
        third = await _write(store, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=60_000))
        assert third is not None and third.token == second.token + 1 and third.taken_over
        assert (
            await _write(  # w2's renewal comes too late: lost
                store, RenewLease(session_id="ses_a", owner="w2", token=second.token, ttl_ms=60_000)
            )
            is None
        )
        assert await _read(store, Orphans(limit=10)) == []
        # Another session's lease is its own.
        await _write(store, CreateSession(info=_info("ses_b")))
        other = await _write(store, AcquireLease(session_id="ses_b", owner="w2", ttl_ms=60_000))
        assert other is not None and other.token == 1


async def test_a_write_fenced_with_a_replaced_token_is_refused_and_writes_nothing(
    lease_store: tuple[AbstractAsyncContextManager[Store], Callable[[], Any]],
) -> None:
    open_store, elapse = lease_store
    interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        with pytest.raises(LeaseLost):  # no lease at all
            await _write(store, Append(session_id="ses_a", events=[interrupt], fence=1))
        old = await _write(store, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=_SHORT_TTL))
        assert old is not None
        seqs = await _write(store, Append(session_id="ses_a", events=[interrupt], fence=old.token))
        await _write(store, _admit("ses_a", "msg_1", "queue"))
        await elapse()
        new = await _write(store, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=60_000))
        assert new is not None and new.token == old.token + 1
        before = await _read(store, Events(session_id="ses_a", after=-1, limit=100))
        stale: list[Command[Any]] = [
            Append(session_id="ses_a", events=[interrupt], fence=old.token),
            AppendWithPending(session_id="ses_a", events=[interrupt], fence=old.token),
            PromoteInputs(session_id="ses_a", opening=True, timestamp=3, fence=old.token),
            AskPermission(asked=_asked("ses_a", "per_1", ["a"]), fence=old.token),
            InitializeEpoch(
                session_id="ses_a", baseline="b", snapshot="{}", agent="build", fence=old.token
            ),
        ]
        for command in stale:
            with pytest.raises(LeaseLost):
                await _write(store, command)
        assert await _read(store, Events(session_id="ses_a", after=-1, limit=100)) == before
        assert [r.id for r in await _read(store, PendingInputs(session_id="ses_a"))] == ["msg_1"]
        assert await _read(store, Permission(request_id="per_1")) is None
        assert await _read(store, Epoch(session_id="ses_a")) is None
        # The holder's fenced writes go on; after its release they are refused too.
        more = await _write(store, Append(session_id="ses_a", events=[interrupt], fence=new.token))
        assert more == [before[-1].seq + 1] and seqs == [1]
        await _write(store, ReleaseLease(session_id="ses_a", owner="w2", token=new.token))
        with pytest.raises(LeaseLost):
            await _write(store, Append(session_id="ses_a", events=[interrupt], fence=new.token))


async def test_a_parked_lease_is_taken_back_under_its_token_by_its_holder(
    lease_store: tuple[AbstractAsyncContextManager[Store], Callable[[], Any]],
) -> None:
    open_store, _ = lease_store
    interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        held = await _write(store, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=60_000))
        assert isinstance(held, Lease)
        parked = await _write(
            store, ParkLease(session_id="ses_a", owner="w1", token=held.token, idle_ms=60_000)
        )
        assert parked is not None and (parked.token, parked.parked) == (held.token, True)
        assert await _read(store, LeaseOf(session_id="ses_a")) == parked
        assert await _read(store, Orphans(limit=10)) == []
        # Parked, it fences nothing: the holder takes it back first.
        with pytest.raises(LeaseLost):
            await _write(store, Append(session_id="ses_a", events=[interrupt], fence=held.token))
        back = await _write(
            store, RenewLease(session_id="ses_a", owner="w1", token=held.token, ttl_ms=60_000)
        )
        assert back is not None and (back.token, back.parked, back.taken_over) == (
            held.token, False, False,
        )  # fmt: skip
        assert await _write(
            store, Append(session_id="ses_a", events=[interrupt], fence=held.token)
        ) == [1]
        # An admission opens the next activity under the parked lease, in its own batch.
        await _write(
            store, ParkLease(session_id="ses_a", owner="w1", token=held.token, idle_ms=60_000)
        )
        renewal = RenewLease(session_id="ses_a", owner="w1", token=held.token, ttl_ms=60_000)
        receipt, promoted, pending, _ = await _write(
            store, AdmitAndOpen(admit=_admit("ses_a", "msg_1"), lease=renewal)
        )
        assert [r.id for r in promoted] == ["msg_1"] and pending == []
        lease = await _read(store, LeaseOf(session_id="ses_a"))
        assert lease is not None and (lease.token, lease.parked) == (held.token, False)
        # A turn's last write parks it in the same batch, when nothing is pending after it.
        park = ParkLease(session_id="ses_a", owner="w1", token=held.token, idle_ms=60_000)
        ended = AppendWithPending(
            session_id="ses_a", events=[interrupt], fence=held.token, park=park
        )
        assert await _write(store, ended) == []
        lease = await _read(store, LeaseOf(session_id="ses_a"))
        assert lease is not None and (lease.token, lease.parked) == (held.token, True)
        assert await _write(store, renewal) is not None
        await _write(store, _admit("ses_a", "msg_0", "queue"))
        assert [r.id for r in await _write(store, ended)] == ["msg_0"]
        lease = await _read(store, LeaseOf(session_id="ses_a"))
        assert lease is not None and not lease.parked
        await _write(
            store, PromoteInputs(session_id="ses_a", opening=True, timestamp=3, fence=held.token)
        )
        # Input admitted while the holder drove keeps the lease driving when it parks.
        await _write(store, _admit("ses_a", "msg_2", "queue"))
        kept = await _write(
            store, ParkLease(session_id="ses_a", owner="w1", token=held.token, idle_ms=60_000)
        )
        assert kept is not None and (kept.token, kept.parked) == (held.token, False)


async def test_a_parked_lease_acquired_by_another_owner_fences_its_old_holder_off(
    lease_store: tuple[AbstractAsyncContextManager[Store], Callable[[], Any]],
) -> None:
    open_store, elapse = lease_store
    interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        old = await _write(store, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=60_000))
        assert old is not None
        await _write(
            store, ParkLease(session_id="ses_a", owner="w1", token=old.token, idle_ms=60_000)
        )
        # Another owner acquires it at once: a clean hand-over, not a takeover.
        new = await _write(store, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=60_000))
        assert new is not None and (new.token, new.taken_over) == (old.token + 1, False)
        before = await _read(store, Events(session_id="ses_a", after=-1, limit=100))
        renewal = RenewLease(session_id="ses_a", owner="w1", token=old.token, ttl_ms=60_000)
        assert await _write(store, renewal) is None
        assert (
            await _write(
                store, ParkLease(session_id="ses_a", owner="w1", token=old.token, idle_ms=1)
            )
            is None
        )
        stale: list[Command[Any]] = [
            Append(session_id="ses_a", events=[interrupt], fence=old.token),
            AppendWithPending(session_id="ses_a", events=[interrupt], fence=old.token),
            PromoteInputs(session_id="ses_a", opening=True, timestamp=3, fence=old.token),
            AskPermission(asked=_asked("ses_a", "per_1", ["a"]), fence=old.token),
            InitializeEpoch(
                session_id="ses_a", baseline="b", snapshot="{}", agent="build", fence=old.token
            ),
            AdmitAndOpen(admit=_admit("ses_a", "msg_1"), lease=renewal),
        ]
        for command in stale:
            with pytest.raises(LeaseLost):
                await _write(store, command)
        # Nothing of them was written, the refused admission included.
        assert await _read(store, Events(session_id="ses_a", after=-1, limit=100)) == before
        assert await _read(store, PendingInputs(session_id="ses_a")) == []
        assert await _read(store, Permission(request_id="per_1")) is None
        assert await _read(store, Epoch(session_id="ses_a")) is None
        lease = await _read(store, LeaseOf(session_id="ses_a"))
        assert lease is not None and (lease.owner, lease.token) == ("w2", new.token)


async def test_a_parked_lease_expires_after_its_idle_time_as_a_released_one(
    lease_store: tuple[AbstractAsyncContextManager[Store], Callable[[], Any]],
) -> None:
    open_store, elapse = lease_store
    async with open_store as store:
        for sid in ("ses_a", "ses_b"):
            await _write(store, CreateSession(info=_info(sid)))
            held = await _write(store, AcquireLease(session_id=sid, owner="w1", ttl_ms=60_000))
            assert held is not None
            park = ParkLease(session_id=sid, owner="w1", token=held.token, idle_ms=_SHORT_TTL)
            assert (await _write(store, park)).parked
        # Input admitted elsewhere while parked: an orphan (nobody drives it), parked or not.
        await _write(store, _admit("ses_b", "msg_1", "queue"))
        assert await _read(store, Orphans(limit=10)) == ["ses_b"]
        await elapse()
        assert await _read(store, LeaseOf(session_id="ses_a")) is None
        assert await _read(store, Orphans(limit=10)) == ["ses_b"]  # not a takeover: ses_a
        again = await _write(store, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=60_000))
        assert again is not None and not again.taken_over
