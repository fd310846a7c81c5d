"""More than one PostgreSQL store on one database (cluster workers, ``owner=``): each
batch revalidates the sessions it touches, so stores writing the same session alternately
or at once leave contiguous seqs and see each other's writes; reads of a session another
store wrote are not served from stale caches; a store's fenced write is refused once
another store took the lease over, or acquired it parked; another store's commits reach a
listener, one notification per batch however many sessions it wrote (split only past
PostgreSQL's payload limit), merged per session when its consumer is behind, and a
refused write notifies nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import psycopg
import pytest
import trio

from runtime import StorageError
from runtime import events as ev
from runtime.titles import default_title
from storage import (
    AcquireLease,
    AdmitAndOpen,
    AdmitPrompt,
    Append,
    CreateSession,
    Events,
    GetSession,
    History,
    HistoryChanges,
    Lease,
    LeaseLost,
    Listener,
    MessageEntry,
    ParkLease,
    PendingInputs,
    PostgresStore,
    PromoteInputs,
    Query,
    RenewLease,
    SetTitle,
    listen,
)
from storage._pg_listen import CHANNEL


def _info(sid: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=sid, project_id="prj", location=ev.Location(directory="/work"),
        title=default_title(sid), time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


def _admit(sid: str, mid: str) -> AdmitPrompt:
    return AdmitPrompt(
        session_id=sid, message_id=mid, prompt=ev.Prompt(text=mid), delivery="queue",
        timestamp=2,
    )  # fmt: skip


def _write(store: PostgresStore, command: object) -> object:
    outcomes, _ = store.write_batch([command])  # type: ignore[list-item]
    if outcomes[0].error is not None:
        raise outcomes[0].error
    return outcomes[0].value


def _read(store: PostgresStore, query: Query[object]) -> object:
    return store.answer(query)


@pytest.fixture
def two(postgres_database: str, tmp_path: Path) -> list[PostgresStore]:
    stores = [
        PostgresStore.open(postgres_database, directory=tmp_path / name, owner=name)
        for name in ("w1", "w2")
    ]
    yield stores  # type: ignore[misc]
    for store in stores:
        store.close()


def _seqs(store: PostgresStore, sid: str) -> list[int]:
    return [e.seq for e in store.answer(Events(session_id=sid, after=-1, limit=10_000))]


def test_two_stores_admitting_alternately_get_contiguous_seqs_and_see_each_other(
    two: list[PostgresStore],
) -> None:
    a, b = two
    _write(a, CreateSession(info=_info("ses_a")))
    # Both caches hold the session before either writes again.
    assert _read(b, GetSession(session_id="ses_a")) is not None
    assert _read(a, PendingInputs(session_id="ses_a")) == []
    assert _read(b, History(session_id="ses_a")) == []
    for n in range(6):
        receipt, created = _write((a, b)[n % 2], _admit("ses_a", f"msg_{n}"))  # type: ignore[misc]
        assert created
        for store in (a, b):  # the other store's admission is seen at once, in order
            pending = _read(store, PendingInputs(session_id="ses_a"))
            assert [r.id for r in pending] == [f"msg_{i}" for i in range(n + 1)]  # type: ignore[attr-defined]
    assert _seqs(a, "ses_a") == _seqs(b, "ses_a") == list(range(7))
    # Promoted through A; history read through B (whose cache held it empty).
    promoted, _ = _write(a, PromoteInputs(session_id="ses_a", opening=True, timestamp=3))  # type: ignore[misc]
    assert [r.id for r in promoted] == ["msg_0"]
    assert [m.id for _, m in _read(b, History(session_id="ses_a"))] == ["msg_0"]  # type: ignore[attr-defined]
    assert _read(b, MessageEntry(message_id="msg_0")) is not None
    view = _read(b, HistoryChanges(session_id="ses_a", generation=-1, version=-1))
    _write(b, PromoteInputs(session_id="ses_a", opening=True, timestamp=4))
    # A's title write sees B's promotion (its seq follows), and B sees A's title.
    updated = _write(a, SetTitle(session_id="ses_a", title="Named", timestamp=5))
    assert updated is not None
    info = _read(b, GetSession(session_id="ses_a"))
    assert isinstance(info, ev.SessionInfo) and info.title == "Named"
    # B's cache of the history is from before A's write: a reader of B gets it all again.
    changes = _read(
        b,
        HistoryChanges(
            session_id="ses_a",
            generation=view.generation,
            version=view.version,  # type: ignore[attr-defined]
        ),
    )
    assert changes.full and [m.id for _, m in changes.entries] == ["msg_0", "msg_1"]  # type: ignore[attr-defined]
    # B cached msg_5's inbox row when it admitted it; A promotes it; B's exact retry of
    # the admission answers the promoted row, not its stale copy.
    promoted, _ = _write(a, PromoteInputs(session_id="ses_a", opening=True, timestamp=6))  # type: ignore[misc]
    assert [r.id for r in promoted] == ["msg_2"]
    for _ in range(3):  # msg_3, msg_4, msg_5
        _write(a, PromoteInputs(session_id="ses_a", opening=True, timestamp=6))
    receipt, created = _write(b, _admit("ses_a", "msg_5"))  # type: ignore[misc]
    assert not created and receipt.promoted_seq == _seqs(a, "ses_a")[-1]
    assert _seqs(a, "ses_a") == list(range(14))


def test_admissions_racing_from_two_stores_are_each_admitted_once_in_contiguous_seqs(
    postgres_database: str, tmp_path: Path
) -> None:
    setup = PostgresStore.open(postgres_database, directory=tmp_path, owner="setup")
    _write(setup, CreateSession(info=_info("ses_a")))
    setup.close()
    per_store, ids = 40, ("w1", "w2")
    errors: list[BaseException] = []

    def admit_all(owner: str) -> None:
        store = PostgresStore.open(postgres_database, directory=tmp_path, owner=owner)
        try:
            for n in range(per_store):
                # Every other admission is retried once: the retry must find the first.
                command = _admit("ses_a", f"msg_{owner}_{n}")
                for _ in range(1 + n % 2):
                    outcomes, _ = store.write_batch([command, command])
                    for outcome in outcomes:
                        if outcome.error is not None:
                            errors.append(outcome.error)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=admit_all, args=(owner,)) for owner in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    check = PostgresStore.open(postgres_database, directory=tmp_path, owner="check")
    try:
        events = check.answer(Events(session_id="ses_a", after=-1, limit=10_000))
        assert [e.seq for e in events] == list(range(1 + 2 * per_store))
        admitted = [msgspec.json.decode(e.data)["messageID"] for e in events[1:]]
        assert sorted(admitted) == sorted(f"msg_{o}_{n}" for o in ids for n in range(per_store))
        pending = check.answer(PendingInputs(session_id="ses_a"))
        assert len(pending) == 2 * per_store
    finally:
        check.close()


def test_a_fenced_write_from_a_store_whose_lease_was_taken_over_is_refused(
    two: list[PostgresStore],
) -> None:
    a, b = two
    interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
    _write(a, CreateSession(info=_info("ses_a")))
    held = _write(a, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=1))
    assert held is not None
    # Expired on PostgreSQL's clock (1 ms): B takes it over with the next token.
    taken = None
    while taken is None:
        taken = _write(b, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=60_000))
    assert taken.token == held.token + 1 and taken.taken_over  # type: ignore[attr-defined]
    with pytest.raises(LeaseLost):
        _write(a, Append(session_id="ses_a", events=[interrupt], fence=held.token))  # type: ignore[attr-defined]
    assert _write(b, Append(session_id="ses_a", events=[interrupt], fence=taken.token)) == [1]  # type: ignore[attr-defined]
    assert _seqs(a, "ses_a") == [0, 1]


def test_a_single_process_store_and_cluster_workers_exclude_each_other(
    postgres_database: str, tmp_path: Path
) -> None:
    worker = PostgresStore.open(postgres_database, directory=tmp_path, owner="w1")
    try:
        with pytest.raises(StorageError, match="another Kittiwake process uses this database"):
            PostgresStore.open(postgres_database, directory=tmp_path)
    finally:
        worker.close()
    alone = PostgresStore.open(postgres_database, directory=tmp_path)
    try:
        with pytest.raises(StorageError, match="another Kittiwake process uses this database"):
            PostgresStore.open(postgres_database, directory=tmp_path, owner="w1")
    finally:
        alone.close()


_ADMIT_SCRIPT = """
import sys
from pathlib import Path
from storage import AdmitPrompt, PostgresStore
from runtime import events as ev
url, owner, count, directory = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
store = PostgresStore.open(url, directory=directory, owner=owner)
for n in range(count):
    mid = f"msg_{owner}_{n}"
    command = AdmitPrompt(session_id="ses_a", message_id=mid, prompt=ev.Prompt(text=mid),
                          delivery="queue", timestamp=2)
    outcomes, _ = store.write_batch([command])
    assert outcomes[0].error is None, outcomes[0].error
store.close()
"""


def test_admissions_from_two_processes_are_each_admitted_once_in_contiguous_seqs(
    postgres_database: str, tmp_path: Path
) -> None:
    store = PostgresStore.open(postgres_database, directory=tmp_path, owner="here")
    try:
        _write(store, CreateSession(info=_info("ses_a")))
        assert _read(store, PendingInputs(session_id="ses_a")) == []  # cached: empty
        count, owners = 20, ("p1", "p2")
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _ADMIT_SCRIPT,
                    postgres_database,
                    owner,
                    str(count),
                    str(tmp_path),
                ],
                stderr=subprocess.PIPE,
            )  # fmt: skip
            for owner in owners
        ]
        for process in processes:
            _, err = process.communicate(timeout=120)
            assert process.returncode == 0, err.decode()
        # This store's cache of the session is stale: it re-reads, then admits after them.
        pending = _read(store, PendingInputs(session_id="ses_a"))
        assert sorted(r.id for r in pending) == sorted(  # type: ignore[attr-defined]
            f"msg_{o}_{n}" for o in owners for n in range(count)
        )
        receipt, _ = _write(store, _admit("ses_a", "msg_last"))  # type: ignore[misc]
        assert receipt.admitted_seq == 2 * count + 1
        assert _seqs(store, "ses_a") == list(range(2 * count + 2))
    finally:
        store.close()


async def test_other_stores_commits_reach_a_listener_merged_when_it_is_behind(
    two: list[PostgresStore], postgres_database: str
) -> None:
    a, b = two
    send, receive = trio.open_memory_channel[tuple[str, int, int]](1)
    got: list[tuple[str, int, int]] = []

    async def upto(sid: str, seq: int) -> None:
        while not any(s == sid and last >= seq for s, _, last in got):
            got.append(await receive.receive())

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(listen, postgres_database, "w2", send)
            _write(a, CreateSession(info=_info("ses_a")))
            _write(b, CreateSession(info=_info("ses_b")))  # B's own: not handed to B
            _write(a, CreateSession(info=_info("ses_c")))
            await upto("ses_c", 0)
            assert got == [("ses_a", 0, 0), ("ses_c", 0, 0)]
            # The consumer is behind (room for one): A's commits merge per session.
            for n in range(5):
                _write(a, _admit("ses_a", f"msg_{n}"))
            _write(a, _admit("ses_c", "msg_c"))
            got.clear()
            await upto("ses_a", 5)
            await upto("ses_c", 1)
            for sid, seqs in (("ses_a", range(1, 6)), ("ses_c", range(1, 2))):
                ranges = [(first, last) for s, first, last in got if s == sid]
                covered = [n for first, last in ranges for n in range(first, last + 1)]
                assert covered == list(seqs)  # in order, none twice, none missing
            assert len(got) < 6
            # A write refused by its fence commits nothing and notifies nothing.
            held = _write(b, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=60_000))
            with pytest.raises(LeaseLost):
                _write(a, Append(session_id="ses_a", events=[], fence=held.token + 1))  # type: ignore[attr-defined]
            interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
            with pytest.raises(LeaseLost):
                _write(a, Append(session_id="ses_a", events=[interrupt], fence=0))
            _write(a, _admit("ses_a", "msg_after"))
            assert await receive.receive() == ("ses_a", 6, 6)
            nursery.cancel_scope.cancel()


def test_a_batch_over_many_sessions_sends_one_notification_read_as_one_per_session(
    two: list[PostgresStore], postgres_database: str
) -> None:
    a, _ = two
    sids = [f"ses_{n:04}" for n in range(800)]  # past one payload's 8000 bytes
    _write(a, CreateSession(info=_info("ses_x")))
    raw = psycopg.connect(postgres_database, autocommit=True)
    listener = Listener(postgres_database, "w2")
    try:
        raw.execute(f"listen {CHANNEL}")
        outcomes, _ = a.write_batch([CreateSession(info=_info(sid)) for sid in sids[:3]])
        assert all(o.error is None for o in outcomes)
        payloads = [n.payload for n in raw.notifies(timeout=10, stop_after=1)]
        payloads += [n.payload for n in raw.notifies(timeout=0.2)]
        assert len(payloads) == 1  # one for the batch, not one per session
        assert listener.wait(10) == [(sid, 0, 0) for sid in sids[:3]]
        outcomes, _ = a.write_batch([CreateSession(info=_info(sid)) for sid in sids[3:]])
        assert all(o.error is None for o in outcomes)
        payloads = [n.payload for n in raw.notifies(timeout=10, stop_after=1)]
        payloads += [n.payload for n in raw.notifies(timeout=0.2)]
        assert 1 < len(payloads) <= 3 and all(len(p.encode()) < 8000 for p in payloads)
        seen: list[tuple[str, int, int]] = []
        while len(seen) < len(sids) - 3:
            seen += listener.wait(10)
        assert seen == [(sid, 0, 0) for sid in sids[3:]]
    finally:
        raw.close()
        listener.close()


def test_a_lease_parked_by_one_store_and_acquired_by_another_fences_the_first_off(
    two: list[PostgresStore],
) -> None:
    a, b = two
    _write(a, CreateSession(info=_info("ses_a")))
    held = _write(a, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=60_000))
    assert isinstance(held, Lease)
    _write(a, ParkLease(session_id="ses_a", owner="w1", token=held.token, idle_ms=60_000))
    taken = _write(b, AcquireLease(session_id="ses_a", owner="w2", ttl_ms=60_000))
    assert isinstance(taken, Lease) and (taken.token, taken.taken_over) == (held.token + 1, False)
    # A still takes itself for the holder: its opening admission, renewal and fenced
    # writes are refused and write nothing.
    renewal = RenewLease(session_id="ses_a", owner="w1", token=held.token, ttl_ms=60_000)
    with pytest.raises(LeaseLost):
        _write(a, AdmitAndOpen(admit=_admit("ses_a", "msg_a"), lease=renewal))
    assert _write(a, renewal) is None
    interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
    with pytest.raises(LeaseLost):
        _write(a, Append(session_id="ses_a", events=[interrupt], fence=held.token))
    assert _seqs(b, "ses_a") == [0] and _read(b, PendingInputs(session_id="ses_a")) == []
    # Admitted without opening, the prompt waits for B, which drives under its lease.
    _write(a, _admit("ses_a", "msg_a"))
    promoted, _ = _write(  # type: ignore[misc]
        b, PromoteInputs(session_id="ses_a", opening=True, timestamp=3, fence=taken.token)
    )
    assert [r.id for r in promoted] == ["msg_a"]


def test_an_opening_admission_answers_what_another_store_changed_under_its_lock(
    two: list[PostgresStore],
) -> None:
    """A holds the session cached and its lease parked; B switches the session's agent.
    A's opening admission is planned on its stale caches first: the batch's version check
    sends it back under the session's lock, and the info it answers has B's switch."""
    a, b = two
    _write(a, CreateSession(info=_info("ses_a")))
    held = _write(a, AcquireLease(session_id="ses_a", owner="w1", ttl_ms=60_000))
    assert isinstance(held, Lease)
    _write(a, ParkLease(session_id="ses_a", owner="w1", token=held.token, idle_ms=60_000))
    cached = _read(a, GetSession(session_id="ses_a"))
    assert isinstance(cached, ev.SessionInfo) and cached.agent is msgspec.UNSET
    switched = ev.AgentSwitched(timestamp=2, session_id="ses_a", message_id="msg_s", agent="plan")
    _write(b, Append(session_id="ses_a", events=[switched]))
    renewal = RenewLease(session_id="ses_a", owner="w1", token=held.token, ttl_ms=60_000)
    opened = _write(a, AdmitAndOpen(admit=_admit("ses_a", "msg_a"), lease=renewal))
    receipt, promoted, _, info = opened  # type: ignore[misc]
    assert [r.id for r in promoted] == [receipt.id] == ["msg_a"]
    assert isinstance(info, ev.SessionInfo) and info.agent == "plan"
    assert info == _read(b, GetSession(session_id="ses_a"))


def test_a_worker_stopped_inside_a_batch_loses_its_connection_and_frees_the_session(
    postgres_database: str, tmp_path: Path
) -> None:
    a = PostgresStore.open(
        postgres_database, directory=tmp_path, owner="w1", stalled_transaction_ms=300
    )
    b = PostgresStore.open(postgres_database, directory=tmp_path, owner="w2")
    try:
        _write(a, CreateSession(info=_info("ses_a")))
        stopped, resume = threading.Event(), threading.Event()

        def stall(batch: object) -> None:  # A stops mid-batch, its session row locked
            stopped.set()
            resume.wait(30)

        result: list[object] = []
        thread = threading.Thread(
            target=lambda: result.append(a.write_batch([_admit("ses_a", "msg_a"), stall]))
        )
        thread.start()
        assert stopped.wait(30)
        # B waits for A's lock until the server ends A's stalled transaction.
        receipt, created = _write(b, _admit("ses_a", "msg_b"))  # type: ignore[misc]
        assert created and receipt.admitted_seq == 1
        resume.set()
        thread.join(30)
        ((outcomes, events),) = result  # type: ignore[misc]
        assert events == [] and all(isinstance(o.error, StorageError) for o in outcomes)
        assert a.broken  # reopened by its StorageActor: nothing of A's batch was written
        assert [r.id for r in _read(b, PendingInputs(session_id="ses_a"))] == ["msg_b"]  # type: ignore[attr-defined]
    finally:
        resume.set()
        a.close()
        b.close()
