"""The storage port's contract: every command and query, against every implementation.

``STORES`` names each implementation by a factory that opens a ``Store`` on a fresh
directory (and, for PostgreSQL, a fresh database of the test's temporary cluster);
every test runs against each: the DuckDB store behind the StorageActor, on its own
thread and inline (the simulation mode), and the PostgreSQL store behind it, alone on
its database and as a cluster worker (``owner``: locked, revalidated batches).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from runtime import PromptConflictError, SessionNotFoundError, open_runtime
from runtime import events as ev
from runtime.titles import default_title
from storage import (
    AdmitAndOpen,
    AdmitContext,
    AdmitPrompt,
    AdmittedInput,
    AllEvents,
    Append,
    AppendWithPending,
    ApprovalRow,
    AskPermission,
    Backup,
    Children,
    Command,
    ContextView,
    CreateSession,
    DeleteSession,
    Epoch,
    EpochConflictError,
    EpochRow,
    Events,
    EventsOfType,
    EventsTail,
    Footprint,
    GetRecord,
    GetSession,
    History,
    HistoryChanges,
    InitializeEpoch,
    IsApproved,
    ListRecords,
    ListSessions,
    MessageEntry,
    Messages,
    PendingInputs,
    Permission,
    Permissions,
    PromoteInputs,
    PutEpoch,
    PutRecord,
    Query,
    RecordRow,
    ReplaceEpoch,
    ReplyPermission,
    ReplyQuestion,
    RevertStands,
    SaveApproval,
    SessionHistory,
    SessionsNeedingResume,
    SessionsWithPending,
    SetTitle,
    Statistics,
    Store,
    Usage,
    UsageRow,
)


@asynccontextmanager
async def _runtime_store(
    directory: Path, mode: Any, store_url: str | None = None,
    store_options: dict[str, Any] | None = None,
) -> AsyncIterator[Store]:  # fmt: skip
    async with open_runtime(
        data_dir=directory, llm=None, storage_mode=mode, store_url=store_url,
        store_options=store_options,
    ) as rt:  # fmt: skip
        yield rt.storage


_Factory = Callable[[Path, pytest.FixtureRequest], AbstractAsyncContextManager[Store]]
STORES: dict[str, _Factory] = {
    "duckdb-threaded": lambda d, _: _runtime_store(d, "threaded"),
    "duckdb-inline": lambda d, _: _runtime_store(d, "inline"),
    "postgresql": lambda d, request: _runtime_store(
        d, "threaded", request.getfixturevalue("postgres_database")
    ),
    "postgresql-worker": lambda d, request: _runtime_store(
        d, "threaded", request.getfixturevalue("postgres_database"), {"owner": "w1"}
    ),
}


@pytest.fixture(params=sorted(STORES))
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AbstractAsyncContextManager[Store]:
    return STORES[request.param](tmp_path, request)


def _info(
    sid: str, *, title: str | None = None, parent: str | None = None, project: str = "prj"
) -> ev.SessionInfo:
    return ev.SessionInfo(
        id=sid, project_id=project, location=ev.Location(directory="/work"),
        title=title or default_title(sid), time=ev.SessionTime(created=1, updated=1),
        parent_id=parent if parent is not None else msgspec.UNSET,
    )  # fmt: skip


def _admit(sid: str, mid: str, delivery: ev.Delivery = "steer", text: str = "hi") -> AdmitPrompt:
    return AdmitPrompt(
        session_id=sid, message_id=mid, prompt=ev.Prompt(text=text), delivery=delivery,
        timestamp=2,
    )  # fmt: skip


def _asked(sid: str, rid: str, resources: list[str]) -> ev.PermissionAsked:
    return ev.PermissionAsked(
        timestamp=3, session_id=sid, request_id=rid, agent="build", tool="", call_id="",
        permission="edit", resources=resources,
    )  # fmt: skip


def _roundtrip(message: Command[Any] | Query[Any]) -> None:
    """A message is plain tagged data: it encodes with its tag and decodes to itself."""
    data = msgspec.json.encode(message)
    assert msgspec.json.decode(data)["type"] == type(message).__struct_config__.tag
    assert msgspec.json.decode(data, type=type(message)) == message


async def _write(store: Store, command: Command[Any]) -> Any:
    _roundtrip(command)
    return await store.write(command)


async def _read(store: Store, query: Query[Any]) -> Any:
    _roundtrip(query)
    return await store.read(query)


async def test_sessions_are_created_listed_and_deleted(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    async with open_store as store:
        parent = _info("ses_a")
        assert await _write(store, CreateSession(info=parent)) == (parent, True)
        assert await _write(store, CreateSession(info=parent)) == (parent, False)
        child = _info("ses_b", parent="ses_a")
        await _write(store, CreateSession(info=child, fresh=True))
        with pytest.raises(SessionNotFoundError):
            await _write(store, CreateSession(info=_info("ses_c", parent="ses_none")))
        assert await _read(store, GetSession(session_id="ses_a")) == parent
        assert await _read(store, GetSession(session_id="ses_c")) is None
        assert await _read(store, ListSessions(limit=10)) == [child, parent]
        assert await _read(store, ListSessions(limit=1, before="ses_b")) == [parent]
        other = _info("ses_o", project="prj_other")
        await _write(store, CreateSession(info=other))
        assert await _read(store, ListSessions(limit=10, project_id="prj_other")) == [other]
        assert await _read(store, ListSessions(limit=10, project_id="prj")) == [child, parent]
        assert await _read(store, ListSessions(limit=1, before="ses_b", project_id="prj")) == [
            parent
        ]
        assert await _read(store, ListSessions(limit=10, project_id="prj_none")) == []
        assert await _read(store, Children(session_id="ses_a")) == [child]
        assert (await _read(store, Footprint(session_id="ses_b")))["session"] == 1
        assert await _write(store, DeleteSession(session_id="ses_b", timestamp=5)) == child
        assert await _read(store, GetSession(session_id="ses_b")) is None
        assert set((await _read(store, Footprint(session_id="ses_b"))).values()) == {0}
        with pytest.raises(SessionNotFoundError):
            await _write(store, DeleteSession(session_id="ses_b", timestamp=6))
        page, gone = await _read(store, EventsTail(session_id="ses_b", after=-1, limit=10))
        assert (page, gone) == ([], True)


async def test_admission_promotion_and_history(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        queued, created = await _write(store, _admit("ses_a", "msg_q", "queue", "later"))
        assert created and queued.id == "msg_q" and queued.delivery == "queue"
        assert await _write(store, _admit("ses_a", "msg_q", "queue", "later")) == (queued, False)
        with pytest.raises(PromptConflictError):
            await _write(store, _admit("ses_a", "msg_q", "queue", "other"))
        with pytest.raises(SessionNotFoundError):
            await _write(store, _admit("ses_none", "msg_x"))
        steer, _ = await _write(store, _admit("ses_a", "msg_s", "steer", "now"))
        assert [r.id for r in await _read(store, PendingInputs(session_id="ses_a"))] == [
            "msg_q", "msg_s",
        ]  # fmt: skip
        assert await _read(store, SessionsWithPending()) == ["ses_a"]
        # A steer is pending: opening promotes it, never the queued prompt beside it.
        promoted, pending = await _write(
            store, PromoteInputs(session_id="ses_a", opening=True, timestamp=3)
        )
        assert [r.id for r in promoted] == ["msg_s"] and [r.id for r in pending] == ["msg_q"]
        assert promoted[0].promoted_seq > steer.admitted_seq
        # Not opening: a queued prompt waits.
        promoted, pending = await _write(
            store, PromoteInputs(session_id="ses_a", opening=False, timestamp=4)
        )
        assert promoted == [] and [r.id for r in pending] == ["msg_q"]
        view = await _read(store, HistoryChanges(session_id="ses_a", generation=-1, version=-1))
        assert view.full and [m.id for _, m in view.entries] == ["msg_s"]
        # Admit and open in one batch; the queued prompt opens its own activity.
        receipt, promoted, pending, info = await _write(
            store, AdmitAndOpen(admit=_admit("ses_a", "msg_q2", "queue", "after"))
        )
        assert receipt.id == "msg_q2"
        assert [r.id for r in promoted] == ["msg_q"] and [r.id for r in pending] == ["msg_q2"]
        assert info == await _read(store, GetSession(session_id="ses_a"))  # read in the batch
        delta = await _read(
            store,
            HistoryChanges(session_id="ses_a", generation=view.generation, version=view.version),
        )
        assert [m.id for _, m in delta.entries] == ["msg_q"]
        history = await _read(store, History(session_id="ses_a"))
        assert [m.id for _, m in history] == ["msg_s", "msg_q"]
        seq = history[1][0]
        assert [m.id for _, m in await _read(store, History(session_id="ses_a", from_seq=seq))] == [
            "msg_q"
        ]
        page = await _read(store, Messages(session_id="ses_a", limit=1, order="asc"))
        assert [m.id for _, m in page] == ["msg_s"]
        page = await _read(store, Messages(session_id="ses_a", limit=5, before_seq=seq))
        assert [m.id for _, m in page] == ["msg_s"]
        entry = await _read(store, MessageEntry(message_id="msg_q"))
        assert entry is not None and entry[:2] == ("ses_a", seq)
        assert await _read(store, MessageEntry(message_id="msg_none")) is None
        row = await _read(store, AdmittedInput(message_id="msg_q2"))  # pending
        assert row is not None and (row.session_id, row.prompt.text) == ("ses_a", "after")
        row = await _read(store, AdmittedInput(message_id="msg_q"))  # promoted
        assert row is not None and row.promoted_seq == seq
        assert await _read(store, AdmittedInput(message_id="msg_none")) is None
        info, listed = await _read(store, SessionHistory(session_id="ses_a"))
        assert info is not None and listed == history
        listed, epoch = await _read(store, ContextView(session_id="ses_a"))
        assert listed == history and epoch is None


async def test_events_append_page_and_tail(open_store: AbstractAsyncContextManager[Store]) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        interrupt = ev.InterruptRequested(timestamp=2, session_id="ses_a")
        seqs = await _write(store, Append(session_id="ses_a", events=[interrupt, interrupt]))
        assert seqs == [1, 2]
        await _write(store, _admit("ses_a", "msg_1", "queue"))
        pending = await _write(store, AppendWithPending(session_id="ses_a", events=[interrupt]))
        assert [r.id for r in pending] == ["msg_1"]
        events = await _read(store, Events(session_id="ses_a", after=0, limit=2))
        assert [e.seq for e in events] == [1, 2]
        assert events[0].type == "session.next.interrupt.requested"
        tail, gone = await _read(store, EventsTail(session_id="ses_a", after=2, limit=10))
        assert [e.seq for e in tail] == [3, 4] and gone is False
        everything = await _read(store, AllEvents())
        assert [(e.aggregate_id, e.seq) for e in everything] == [("ses_a", n) for n in range(5)]
        with pytest.raises(SessionNotFoundError):
            await _write(store, Append(session_id="ses_none", events=[interrupt]))


async def test_permission_requests_replies_and_approvals(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        await _write(store, CreateSession(info=_info("ses_b")))
        asked = _asked("ses_a", "per_1", ["a.py"])
        await _write(store, AskPermission(asked=asked))
        await _write(store, AskPermission(asked=asked))  # an exact retry: the same request
        with pytest.raises(PromptConflictError):
            await _write(store, AskPermission(asked=_asked("ses_a", "per_1", ["b.py"])))
        info = await _read(store, Permission(request_id="per_1"))
        assert info is not None and info.status == "pending" and info.resources == ["a.py"]
        assert [p.id for p in await _read(store, Permissions(session_id="ses_a"))] == ["per_1"]
        assert await _read(store, Permission(request_id="per_none")) is None
        with pytest.raises(SessionNotFoundError):  # another session's request
            await _write(
                store,
                ReplyPermission(
                    replied=ev.PermissionReplied(
                        timestamp=4, session_id="ses_b", request_id="per_1", reply="once"
                    )
                ),
            )
        replied = ev.PermissionReplied(
            timestamp=4, session_id="ses_a", request_id="per_1", reply="always"
        )
        await _write(store, ReplyPermission(replied=replied))
        with pytest.raises(PromptConflictError):
            await _write(store, ReplyPermission(replied=replied))
        answered = await _read(store, Permission(request_id="per_1"))
        assert answered is not None and answered.status == "always"
        approved = IsApproved(project="prj", permission="edit", resource="a.py")
        assert await _read(store, approved) is False
        await _write(store, SaveApproval(row=ApprovalRow("prj", "edit", "a.py", 5)))
        await _write(store, SaveApproval(row=ApprovalRow("prj", "edit", "a.py", 6)))
        assert await _read(store, approved) is True
        assert (
            await _read(store, IsApproved(project="other", permission="edit", resource="a.py"))
            is False
        )


async def test_records_are_upserted_listed_newest_first_and_kept_across_reopening(
    open_store: AbstractAsyncContextManager[Store], request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:  # fmt: skip
    async with open_store as store:
        await _write(store, PutRecord(row=RecordRow("token", "a", 1, '{"v":1}')))
        await _write(store, PutRecord(row=RecordRow("token", "b", 2, '{"v":2}')))
        await _write(store, PutRecord(row=RecordRow("audit", "a", 3, "{}")))
        await _write(store, PutRecord(row=RecordRow("token", "a", 1, '{"v":3}')))  # replaced
        assert await _read(store, GetRecord(kind="token", id="a")) == RecordRow(
            "token", "a", 1, '{"v":3}'
        )
        assert await _read(store, GetRecord(kind="token", id="c")) is None
        listed = await _read(store, ListRecords(kind="token", limit=10))
        assert [r.id for r in listed] == ["b", "a"]
        assert [r.id for r in await _read(store, ListRecords(kind="token", limit=1))] == ["b"]
        older = await _read(store, ListRecords(kind="token", limit=10, before=2))
        assert [r.id for r in older] == ["a"]
    async with STORES[request.node.callspec.params["open_store"]](tmp_path, request) as store:
        found = await _read(store, GetRecord(kind="token", id="a"))
        assert found is not None and found.data == '{"v":3}'
        assert [r.id for r in await _read(store, ListRecords(kind="audit", limit=10))] == ["a"]


async def test_an_admission_unless_reverted_is_refused_while_a_revert_stands(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    """A cluster worker's prompt checks for another worker's revert in its own batch:
    refused with ``RevertStands``, nothing written (nor opened), while one stands;
    admitted once it is committed."""
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        guarded = msgspec.structs.replace(_admit("ses_a", "msg_1"), unless_reverted=True)
        first, _ = await _write(store, guarded)
        await _write(store, PromoteInputs(session_id="ses_a", opening=True, timestamp=3))
        reverted = ev.SessionReverted(
            timestamp=4, session_id="ses_a", revert=ev.RevertInfo(message_id="msg_1"),
            hidden_from=first.admitted_seq, files=[],
        )  # fmt: skip
        await _write(store, Append(session_id="ses_a", events=[reverted]))
        before = await _read(store, Events(session_id="ses_a", after=-1, limit=100))
        second = msgspec.structs.replace(_admit("ses_a", "msg_2"), unless_reverted=True)
        with pytest.raises(RevertStands):
            await _write(store, second)
        with pytest.raises(RevertStands):
            await _write(store, AdmitAndOpen(admit=second))
        assert await _read(store, Events(session_id="ses_a", after=-1, limit=100)) == before
        assert await _read(store, PendingInputs(session_id="ses_a")) == []
        committed = ev.RevertCommitted(timestamp=5, session_id="ses_a", message_ids=["msg_1"])
        await _write(store, Append(session_id="ses_a", events=[committed]))
        receipt, promoted, _, info = await _write(store, AdmitAndOpen(admit=second))
        assert receipt.id == "msg_2" and [r.id for r in promoted] == ["msg_2"]
        assert info.revert is msgspec.UNSET  # the session as the admission left it


async def test_a_question_reply_admits_its_late_answer_only_for_a_failed_call(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    """The reply and the late answer are one batch: a call still waiting gets neither
    prompt nor conflict; a failed call's answer is admitted with the reply; an admission
    that fails takes the reply with it."""
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        ids = dict(timestamp=2, session_id="ses_a", assistant_message_id="msg_a")
        model = ev.ModelRef(id="m", provider_id="p")
        await _write(store, Append(session_id="ses_a", events=[
            ev.StepStarted(**ids, agent="build", model=model),
            ev.ToolCalled(**ids, call_id="call_w", tool="question", input={}),
            ev.ToolCalled(**ids, call_id="call_f", tool="question", input={}),
            ev.ToolFailed(**ids, call_id="call_f", error=ev.SessionError(message="cut")),
        ]))  # fmt: skip

        def reply(rid: str, call: str | None, mid: str, text: str = "late") -> ReplyQuestion:
            replied = ev.QuestionReplied(
                timestamp=3, session_id="ses_a", request_id=rid, answers=[["Red"]]
            )
            tool = ev.QuestionTool(message_id="msg_a", call_id=call) if call else None
            return ReplyQuestion(replied, tool, _admit("ses_a", mid, text=text))

        assert await _write(store, reply("que_w", "call_w", "msg_w")) is None
        late = await _write(store, reply("que_f", "call_f", "msg_f"))
        assert late is not None and late.id == "msg_f" and late.prompt.text == "late"
        no_call = await _write(store, reply("que_n", None, "msg_n"))
        assert no_call is not None and no_call.id == "msg_n"
        with pytest.raises(PromptConflictError):  # msg_f is in use with another text
            await _write(store, reply("que_x", "call_f", "msg_f", "other"))
        pending = await _read(store, PendingInputs(session_id="ses_a"))
        assert [r.id for r in pending] == ["msg_f", "msg_n"]
        replied = await _read(
            store, EventsOfType(types=["question.v2.replied"], session_id="ses_a", limit=10)
        )
        assert [ev.decode_event(e.data).request_id for e in replied] == ["que_w", "que_f", "que_n"]


async def test_context_epochs(open_store: AbstractAsyncContextManager[Store]) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        assert await _read(store, Epoch(session_id="ses_a")) is None
        init = InitializeEpoch(session_id="ses_a", baseline="base", snapshot="{}", agent="build")
        first = await _write(store, init)
        assert first == EpochRow("ses_a", "base", "{}", "build", 1, None, 0)
        assert await _write(store, init) == first  # one exists: it stands
        row = msgspec.structs.replace(first, snapshot='{"k":1}', revision=1)
        update = ev.ContextUpdated(timestamp=3, session_id="ses_a", message_id="msg_c", text="t")
        assert await _write(store, AdmitContext(row=row, expected_revision=0, update=update)) == row
        with pytest.raises(EpochConflictError):
            await _write(store, AdmitContext(row=row, expected_revision=0, update=update))
        history = await _read(store, History(session_id="ses_a"))
        assert [m.id for _, m in history] == ["msg_c"]
        replaced = await _write(
            store,
            ReplaceEpoch(
                session_id="ses_a", baseline="new", snapshot="{}", agent="build",
                expected_revision=1,
            ),
        )  # fmt: skip
        assert (replaced.baseline, replaced.revision) == ("new", 2)
        assert replaced.baseline_seq > history[0][0]
        with pytest.raises(EpochConflictError):
            await _write(store, PutEpoch(row=first, expected_revision=0))
        await _write(store, PutEpoch(row=first))
        assert await _read(store, Epoch(session_id="ses_a")) == first
        listed, epoch = await _read(store, ContextView(session_id="ses_a"))
        assert epoch == first and [m.id for _, m in listed] == ["msg_c"]


async def test_titles_are_set_once(open_store: AbstractAsyncContextManager[Store]) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        updated = await _write(store, SetTitle(session_id="ses_a", title="Fix it", timestamp=7))
        assert updated is not None and updated.title == "Fix it" and updated.time.updated == 7
        assert await _read(store, GetSession(session_id="ses_a")) == updated
        assert await _write(store, SetTitle(session_id="ses_a", title="Again", timestamp=8)) is None
        assert await _write(store, SetTitle(session_id="ses_none", title="x", timestamp=8)) is None


async def test_store_maintenance_and_resume_listing(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        assert await _read(store, SessionsNeedingResume()) == []
        needed = ev.ResumeNeeded(timestamp=2, session_id="ses_a")
        await _write(store, Append(session_id="ses_a", events=[needed]))
        assert await _read(store, SessionsNeedingResume()) == ["ses_a"]
        assert await _read(store, Backup()) >= 0
        statistics = await _read(store, Statistics())
        assert msgspec.to_builtins(statistics)["operations"] >= 2


async def test_a_call_left_without_a_result_is_listed_until_recovered(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    """A turn failed writing a call's result and closed its step failed; a crash then cut
    its own recovery: start-up recovery finds the session through this listing."""
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        ids = dict(timestamp=2, session_id="ses_a", assistant_message_id="msg_a")
        model = ev.ModelRef(id="m", provider_id="p")
        error = ev.SessionError(message="Internal error: StorageError: journal append failed")
        turn: list[ev.DurableEvent] = [
            ev.StepStarted(**ids, agent="build", model=model),
            ev.ToolCalled(**ids, call_id="call_1", tool="work", input={}),
            ev.StepFailed(**ids, error=error),
        ]
        await _write(store, Append(session_id="ses_a", events=turn))
        assert await _read(store, SessionsNeedingResume()) == ["ses_a"]
        closed = ev.ToolFailed(**ids, call_id="call_1", error=error)
        await _write(store, Append(session_id="ses_a", events=[closed]))
        assert await _read(store, SessionsNeedingResume()) == []


async def test_a_failed_command_writes_nothing_and_unknown_messages_are_refused(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    async with open_store as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        with pytest.raises(PromptConflictError):
            await _write(store, AskPermission(asked=_asked("ses_a", "per_1", ["a"])))
            await _write(store, AskPermission(asked=_asked("ses_a", "per_1", ["b"])))
        assert [p.resources for p in await _read(store, Permissions(session_id="ses_a"))] == [["a"]]
        with pytest.raises(TypeError):
            await store.write(Command())
        with pytest.raises(TypeError):
            await store.read(Query())


async def test_usage_sums_turns_tokens_cost_and_failures_from_the_events(
    open_store: AbstractAsyncContextManager[Store],
) -> None:
    day = 86_400_000
    model_a, model_b = ev.ModelRef(id="a", provider_id="p"), ev.ModelRef(id="b", provider_id="p")

    def step(sid: str, mid: str, model: ev.ModelRef, at: int, inp: int, cost: float) -> list[Any]:
        tokens = ev.TokenUsage(input=inp, output=2, cache=ev.TokenCache(read=1))
        return [
            ev.StepStarted(timestamp=at, session_id=sid, assistant_message_id=mid,
                           agent="build", model=model),
            ev.StepEnded(timestamp=at, session_id=sid, assistant_message_id=mid, finish="stop",
                         cost=cost, tokens=tokens),
        ]  # fmt: skip

    failed = [
        ev.StepStarted(timestamp=day + 5, session_id="ses_b", assistant_message_id="m3",
                       agent="build", model=model_b),
        ev.ToolInputStarted(
            timestamp=day + 5, session_id="ses_b", assistant_message_id="m3", call_id="c1",
            name="read",
        ),
        ev.ToolCalled(
            timestamp=day + 5, session_id="ses_b", assistant_message_id="m3", call_id="c1",
            tool="read", input={},
        ),
        ev.ToolFailed(timestamp=day + 6, session_id="ses_b", assistant_message_id="m3",
                      call_id="c1", error=ev.SessionError(message="boom")),
        ev.StepFailed(timestamp=day + 7, session_id="ses_b", assistant_message_id="m3",
                      error=ev.SessionError(message="provider down")),
    ]  # fmt: skip
    async with open_store as store:
        for sid in ("ses_a", "ses_b"):
            await _write(store, CreateSession(info=_info(sid)))
        await _write(
            store, Append(session_id="ses_a", events=step("ses_a", "m1", model_a, 10, 100, 0.25))
        )
        await _write(
            store, Append(session_id="ses_b", events=step("ses_b", "m2", model_a, day, 7, 0.5))
        )
        await _write(store, Append(session_id="ses_b", events=failed))
        by_model = await _read(store, Usage(by="model"))
        by_session = await _read(store, Usage(by="session"))
        by_day = await _read(store, Usage(by="day"))
        recent = await _read(store, Usage(by="session", since_ms=day))
    assert by_model == [
        UsageRow(key="a", turns=2, tokens_in=107, tokens_out=4, tokens_cached=2, cost=0.75,
                 errors=0),
        UsageRow(key="b", turns=1, tokens_in=0, tokens_out=0, tokens_cached=0, cost=0.0,
                 errors=2),
    ]  # fmt: skip
    assert [(r.key, r.turns, r.cost, r.errors) for r in by_session] == [
        ("ses_a", 1, 0.25, 0), ("ses_b", 2, 0.5, 2),
    ]  # fmt: skip
    assert [(r.key, r.turns) for r in by_day] == [("1970-01-01", 1), ("1970-01-02", 2)]
    assert [r.key for r in recent] == ["ses_b"]


@pytest.mark.parametrize("mode", ["threaded", "inline"])
async def test_message_pages_agree_from_the_cached_history_and_from_duckdb(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's history held in the store's cache answers its message pages (no read
    barrier); once the cache let it go, DuckDB answers them, and the pages agree."""
    import storage._caches
    import storage._pipeline

    for module in (storage._caches, storage._pipeline):  # one history held at a time
        monkeypatch.setattr(module, "CACHE_HISTORIES", 1)
    queries = [
        Messages(session_id="ses_a", limit=limit, order=order, after_seq=after, before_seq=before)
        for limit in (1, 2, 10)
        for order in ("asc", "desc")
        for after in (None, 0, 3)
        for before in (None, 4, 100)
    ]

    async def pages(store: Store) -> list[list[tuple[int, str]]]:
        return [[(seq, m.id) for seq, m in await _read(store, q)] for q in queries]

    async with _runtime_store(tmp_path, mode) as store:
        await _write(store, CreateSession(info=_info("ses_a")))
        for n in range(6):
            await _write(store, _admit("ses_a", f"msg_{n}"))
        await _write(store, PromoteInputs(session_id="ses_a", opening=True, timestamp=3))
        cached = await pages(store)
        await _write(store, CreateSession(info=_info("ses_b")))  # ses_a's history goes
        assert await pages(store) == cached
    whole = cached[queries.index(Messages(session_id="ses_a", limit=10, order="asc"))]
    assert [mid for _, mid in whole] == [f"msg_{n}" for n in range(6)]
    assert any(0 < len(page) < 6 for page in cached)  # the bounds cut some pages
