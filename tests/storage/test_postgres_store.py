"""The PostgreSQL store beyond the contract suite: what it answers is committed in
PostgreSQL, a new process finds it all, a lost connection is reopened, one store holds a
database at a time, and missing binaries fail the run instead of skipping it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import psycopg
import pytest

from runtime import StorageError, open_runtime
from runtime import events as ev
from runtime.titles import default_title
from storage import (
    AdmitPrompt,
    Append,
    CreateSession,
    Events,
    GetSession,
    History,
    ListSessions,
    PendingInputs,
    PostgresStore,
    PromoteInputs,
    SessionsNeedingResume,
)
from tests.postgres import find_binaries


def _info(sid: str) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=sid, project_id="prj", location=ev.Location(directory="/work"),
        title=default_title(sid), time=ev.SessionTime(created=1, updated=1),
    )  # fmt: skip


def _admit(sid: str, mid: str, delivery: ev.Delivery) -> AdmitPrompt:
    return AdmitPrompt(
        session_id=sid, message_id=mid, prompt=ev.Prompt(text=mid), delivery=delivery,
        timestamp=2,
    )  # fmt: skip


async def test_admission_is_committed_before_it_is_answered_and_survives_a_restart(
    postgres_database: str, tmp_path: Path
) -> None:
    async with open_runtime(data_dir=tmp_path, llm=None, store_url=postgres_database) as rt:
        store = rt.storage
        await store.write(CreateSession(info=_info("ses_a")))
        await store.write(_admit("ses_a", "msg_1", "steer"))
        # Another connection sees the row the moment the admission is answered.
        with psycopg.connect(postgres_database) as other:
            rows = other.execute(
                "select id, delivery, promoted_seq from session_input where session_id = %s",
                ["ses_a"],
            ).fetchall()
        assert rows == [("msg_1", "steer", None)]
        await store.write(PromoteInputs(session_id="ses_a", opening=True, timestamp=3))
        await store.write(_admit("ses_a", "msg_2", "queue"))
        interrupt = ev.InterruptRequested(timestamp=4, session_id="ses_a")
        await store.write(Append(session_id="ses_a", events=[interrupt]))
        before = (
            await store.read(GetSession(session_id="ses_a")),
            await store.read(History(session_id="ses_a")),
            await store.read(PendingInputs(session_id="ses_a")),
            await store.read(Events(session_id="ses_a", after=-1, limit=100)),
        )
    # A new runtime (empty caches) on the same database finds exactly what the first
    # committed. recover=False: start-up recovery writes to ses_a and wakes it for msg_2,
    # and that drain would run concurrently with these reads (see the restart below).
    async with open_runtime(
        data_dir=tmp_path / "b", llm=None, store_url=postgres_database, recover=False
    ) as rt:
        store = rt.storage
        after = (
            await store.read(GetSession(session_id="ses_a")),
            await store.read(History(session_id="ses_a")),
            await store.read(PendingInputs(session_id="ses_a")),
            await store.read(Events(session_id="ses_a", after=-1, limit=100)),
        )
        assert after == before
        _, history, pending, events = after
        assert [m.id for _, m in history] == ["msg_1"] and [r.id for r in pending] == ["msg_2"]
        # msg_1 was promoted and never answered: cut short, not yet recovered.
        assert await store.read(SessionsNeedingResume()) == ["ses_a"]
        seqs = await store.write(Append(session_id="ses_a", events=[interrupt]))
        assert seqs == [events[-1].seq + 1]  # seqs go on where the stored events end
        stored = await store.read(Events(session_id="ses_a", after=-1, limit=100))
    # A restart recovers it: msg_1's cut work is marked as needing a resume first, then
    # the start-up wake drains msg_2, never promoted (its turn fails: no provider).
    async with open_runtime(data_dir=tmp_path / "c", llm=None, store_url=postgres_database) as rt:
        await rt.execution.wait_idle("ses_a")
        events = await rt.storage.read(Events(session_id="ses_a", after=-1, limit=100))
        assert events[: len(stored)] == stored
        assert [e.type for e in events[len(stored) :]] == [
            "session.resume.needed",
            "session.next.prompt.promoted",
            "session.next.step.started",
            "session.next.step.failed",
            "session.run.failed",
        ]
        assert await rt.storage.read(PendingInputs(session_id="ses_a")) == []
        history = await rt.storage.read(History(session_id="ses_a"))
        assert [m.id for _, m in history][:2] == ["msg_1", "msg_2"]
        info = await rt.storage.read(GetSession(session_id="ses_a"))
        assert info is not None and info.needs_resume is msgspec.UNSET  # the turn cleared it
        assert isinstance(info.last_error, ev.RunError)
        assert info.last_error.tag == "ProviderAuthError"


async def test_a_lost_connection_fails_the_request_and_the_store_reopens(
    postgres_database: str, tmp_path: Path
) -> None:
    async with open_runtime(data_dir=tmp_path, llm=None, store_url=postgres_database) as rt:
        store = rt.storage
        await store.write(CreateSession(info=_info("ses_a")))
        with psycopg.connect(postgres_database, autocommit=True) as admin:
            killed = admin.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where datname = current_database() and pid <> pg_backend_pid()"
            ).fetchall()
        assert killed == [(True,)]
        with pytest.raises(StorageError):
            await store.read(ListSessions(limit=10))
        # The StorageActor is restarted by its supervisor and reconnects: nothing lost.
        listed = await store.read(ListSessions(limit=10))
        assert [i.id for i in listed] == ["ses_a"]
        receipt, created = await store.write(_admit("ses_a", "msg_1", "queue"))
        assert created and msgspec.structs.asdict(receipt)["id"] == "msg_1"


def test_a_second_store_on_one_database_is_refused_until_the_first_closes(
    postgres_database: str, tmp_path: Path
) -> None:
    first = PostgresStore.open(postgres_database, directory=tmp_path)
    try:
        with pytest.raises(StorageError, match="another Kittiwake process uses this database"):
            PostgresStore.open(postgres_database, directory=tmp_path)
    finally:
        first.close()
    PostgresStore.open(postgres_database, directory=tmp_path).close()


def test_missing_postgresql_binaries_fail_with_the_way_to_install_them(tmp_path: Path) -> None:
    (tmp_path / "15" / "bin").mkdir(parents=True)  # a version dir without initdb
    with pytest.raises(pytest.fail.Exception, match="make postgresql"):
        find_binaries(tmp_path)
