"""More than one PostgreSQL store on one database (cluster workers, ``owner=``): each
batch revalidates the sessions it touches, so stores writing the same session alternately
or at once leave contiguous seqs and see each other's writes; reads of a session another
store wrote are not served from stale caches; a store's fenced write is refused once
another store took the lease over."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
import pytest

from runtime import StorageError
from runtime import events as ev
from runtime.titles import default_title
from storage import (
    AcquireLease,
    AdmitPrompt,
    Append,
    CreateSession,
    Events,
    GetSession,
    History,
    HistoryChanges,
    LeaseLost,
    MessageEntry,
    PendingInputs,
    PostgresStore,
    PromoteInputs,
    Query,
    SetTitle,
)


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
    assert _seqs(a, "ses_a") == list(range(10))


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
