"""Replaying the event table into an empty store rebuilds identical projections."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime import AssistantMessage, Location, Prompt, open_runtime
from runtime.llm import LLMEvent, LLMRequest, ScriptedLLM
from runtime.tools import ToolEnvironment, ToolRegistry
from storage import EventStore

# session_context_epoch is not derived from events (its rows travel in the journal beside
# them), so a replay of the event table alone does not recreate it.
TABLES = {
    "event": "aggregate_id, seq",
    "session": "id",
    "session_input": "id",
    "session_message": "id",
}


def _rows(store: EventStore, table: str, key: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cursor = store.conn.execute(f"select * from {table} order by {key}")
    columns = [d[0] for d in cursor.description]
    return columns, cursor.fetchall()


@pytest.mark.parametrize("mode", ["threaded", "inline"])
async def test_rebuild_from_events_matches_projections(
    tmp_path: Path,
    mode: str,
    echo_script: Callable[[LLMRequest], Sequence[LLMEvent]],
    testing_tools: Callable[[ToolEnvironment], ToolRegistry],
) -> None:
    source = tmp_path / "source"
    llm = ScriptedLLM(echo_script)
    async with open_runtime(data_dir=source, llm=llm, tools=testing_tools, storage_mode=mode) as rt:
        loc = Location(directory=str(tmp_path))
        drained = (await rt.sessions.create(location=loc, title="drained")).id
        await rt.sessions.prompt(drained, prompt=Prompt(text="use echo"))
        await rt.sessions.wait_idle(drained)
        await rt.sessions.prompt(drained, prompt=Prompt(text="again"))
        await rt.sessions.wait_idle(drained)
        waiting = (await rt.sessions.create(location=loc)).id
        await rt.sessions.prompt(waiting, prompt=Prompt(text="later"), resume=False)
        await rt.sessions.prompt(waiting, prompt=Prompt(text="queued"), delivery="queue",
                                 resume=False)  # fmt: skip
        history = await rt.sessions.context(drained)
    assistants = [m for m in history if isinstance(m, AssistantMessage)]
    assert len(llm.requests) == 4
    assert len(assistants) == 4
    kinds = {type(part).__name__ for m in assistants for part in m.content}
    assert {"AssistantText", "AssistantTool"} <= kinds, kinds

    original = EventStore.open(source)
    rebuilt = EventStore.open(tmp_path / "rebuilt")
    try:
        events = list(original.all_events())
        assert len(events) > 20
        rebuilt.rebuild_from(iter(events))
        assert list(rebuilt.all_events()) == events
        assert {e.type for e in events} >= {"session.created", "session.next.tool.success"}
        for table, key in TABLES.items():
            columns, expected = _rows(original, table, key)
            again_columns, actual = _rows(rebuilt, table, key)
            assert again_columns == columns
            assert len(actual) == len(expected), table
            for want, got in zip(expected, actual, strict=True):
                for column, a, b in zip(columns, want, got, strict=True):
                    assert a == b, (table, want[0], column)
        counts = {t: len(_rows(original, t, k)[1]) for t, k in TABLES.items()}
        assert counts["session"] == 2
        assert counts["session_input"] == 4
        assert counts["session_message"] >= 6
        for sid in (drained,):
            assert rebuilt.history(sid) == original.history(sid)
        assert rebuilt.pending_inputs(waiting) == original.pending_inputs(waiting)
        assert len(rebuilt.pending_inputs(waiting)) == 2
    finally:
        original.close()
        rebuilt.close()
