"""HistoryView: incremental reads and lowering give what a full recompute gives."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Prompt
from runtime import events as ev
from runtime import messages as m
from runtime.history import HistoryDelta, HistoryView, lower_history, visible_history
from storage import AdmitPrompt, CreateSession, EventStore, PromoteInputs

MODELS = [ev.ModelRef(id="a", provider_id="p"), ev.ModelRef(id="b", provider_id="p")]
TIME = m.MessageTime(created=1)


def _message(kind: str, message_id: str, revision: int) -> m.SessionMessage:
    if kind == "user":
        return m.UserMessage(id=message_id, time=TIME, text=f"{message_id}/{revision}")
    if kind == "system":
        return m.SystemMessage(id=message_id, time=TIME, text=f"{message_id}/{revision}")
    return m.AssistantMessage(
        id=message_id, time=TIME, agent="build", model=MODELS[revision % 2],
        content=[m.AssistantText(id="t", text=f"{message_id}/{revision}")],
    )  # fmt: skip


# An operation: ("put", index of an existing message or -1 for a new one, kind),
# ("read",), ("baseline", seq or None), ("model", 0|1), ("evict",).
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"), st.integers(-1, 12), st.sampled_from(["user", "system", "assistant"])
        ),
        st.tuples(st.just("read")),
        st.tuples(st.just("baseline"), st.none() | st.integers(0, 40)),
        st.tuples(st.just("model"), st.integers(0, 1)),
        st.tuples(st.just("evict")),
    ),
    max_size=60,
)


class _Truth:
    """The store's side, reduced to what a delta needs: entries in change order."""

    def __init__(self) -> None:
        self.generation, self.version = 1, 0
        self.entries: dict[str, tuple[int, m.SessionMessage, int]] = {}

    def put(self, seq: int, message: m.SessionMessage) -> None:
        self.version += 1
        self.entries.pop(message.id, None)
        self.entries[message.id] = (seq, message, self.version)

    def delta(self, generation: int, version: int) -> HistoryDelta:
        if generation != self.generation:
            rows = sorted(((s, msg) for s, msg, _ in self.entries.values()), key=lambda r: r[0])
            return HistoryDelta(self.generation, self.version, True, rows)
        changed = [(s, msg) for s, msg, at in self.entries.values() if at > version]
        return HistoryDelta(self.generation, self.version, False, changed)

    def listing(self) -> list[tuple[int, m.SessionMessage]]:
        return sorted(((s, msg) for s, msg, _ in self.entries.values()), key=lambda r: r[0])


@settings(max_examples=300, deadline=None)
@given(operations)
def test_incremental_lowering_equals_a_full_recompute(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    truth, view = _Truth(), HistoryView()
    ids: list[str] = []
    seq, model, baseline = 0, MODELS[0], None
    for op in ops:
        if op[0] == "put":
            seq += 1
            if op[1] < 0 or op[1] >= len(ids):
                ids.append(f"msg_{len(ids)}")
                truth.put(seq, _message(op[2], ids[-1], seq))
            else:
                old_seq, old, _ = truth.entries[ids[op[1]]]
                kind = {m.UserMessage: "user", m.SystemMessage: "system"}.get(
                    type(old), "assistant"
                )
                truth.put(old_seq, _message(kind, old.id, seq))
        elif op[0] == "baseline":
            baseline = op[1]
        elif op[0] == "model":
            model = MODELS[op[1]]
        elif op[0] == "evict":
            truth.generation += 1
        view.apply(truth.delta(view.generation, view.version))
        expected = lower_history(
            (msg for _, msg in visible_history(truth.listing(), baseline)), model
        )
        assert view.lowered(model, baseline) == expected
        assert view.rows == truth.listing()


def test_the_store_hands_out_only_what_changed(tmp_path: Path) -> None:
    """A real store: the second read of an unchanged session is empty, a new message
    comes alone, and a reader from another cache generation gets everything."""
    store = EventStore.open(tmp_path)
    try:
        info = ev.SessionInfo(
            id="ses_h", project_id="p", location=ev.Location(directory="/a"), title="t",
            time=ev.SessionTime(created=1, updated=1),
        )  # fmt: skip
        store.write_batch([CreateSession(info=info)])
        for n in range(3):
            admit = AdmitPrompt(
                session_id="ses_h", message_id=f"msg_{n}", prompt=Prompt(text=f"p{n}"),
                delivery="queue", timestamp=n, fresh=True,
            )  # fmt: skip
            store.write_batch([admit])
            store.write_batch([PromoteInputs(session_id="ses_h", opening=True, timestamp=n)])
        first = store.history_delta("ses_h", -1, -1)
        assert first.full and [msg.id for _, msg in first.entries] == ["msg_0", "msg_1", "msg_2"]
        again = store.history_delta("ses_h", first.generation, first.version)
        assert not again.full and again.entries == []
        admit = AdmitPrompt(
            session_id="ses_h", message_id="msg_3", prompt=Prompt(text="p3"), delivery="queue",
            timestamp=9, fresh=True,
        )  # fmt: skip
        store.write_batch([admit])
        store.write_batch([PromoteInputs(session_id="ses_h", opening=True, timestamp=9)])
        later = store.history_delta("ses_h", first.generation, first.version)
        assert not later.full and [msg.id for _, msg in later.entries] == ["msg_3"]
        stale = store.history_delta("ses_h", first.generation - 1, first.version)
        assert stale.full and len(stale.entries) == 4
    finally:
        store.close()
