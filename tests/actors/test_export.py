"""Exporting a session with its subsessions (``actors.export_events``) and importing them
into another store (``actors.import_events``), on real DuckDB stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors import export_events, import_events
from runtime import InvalidInputError, PromptConflictError, open_runtime
from runtime import events as ev
from runtime.llm import ScriptedLLM
from storage import Append


async def test_a_session_goes_with_its_subsessions_whole(tmp_path: Path) -> None:
    here = ev.Location(directory=str(tmp_path))
    async with open_runtime(data_dir=tmp_path / "a", llm=ScriptedLLM([])) as rt:
        root = await rt.sessions.create(location=here, title="root")
        child = await rt.sessions.create(location=here, title="child", parent_id=root.id)
        grandchild = await rt.sessions.create(location=here, title="deeper", parent_id=child.id)
        other = await rt.sessions.create(location=here, title="not exported")
        await rt.storage.write(Append(session_id=child.id, events=[
            ev.Synthetic(timestamp=5, session_id=child.id, message_id="msg_1", text="a note"),
        ]))  # fmt: skip
        events = await export_events(rt, root.id)
        with pytest.raises(InvalidInputError, match="more than 2 events"):
            await export_events(rt, root.id, max_events=2)
    order = [(e.aggregate_id, e.seq, e.type) for e in events]
    assert order == [
        (root.id, 0, "session.created"),
        (child.id, 0, "session.created"),
        (child.id, 1, "session.next.synthetic"),
        (grandchild.id, 0, "session.created"),
    ]
    assert other.id not in {e.aggregate_id for e in events}

    async with open_runtime(data_dir=tmp_path / "b", llm=ScriptedLLM([])) as rt:
        infos = await import_events(rt, events)
        assert [info.id for info in infos] == [root.id, child.id, grandchild.id]
        assert [c.id for c in await rt.sessions.children(root.id)] == [child.id]
        assert [c.id for c in await rt.sessions.children(child.id)] == [grandchild.id]
        again = await export_events(rt, root.id)
        assert [(e.aggregate_id, e.seq, e.type, e.version, e.data) for e in again] == [
            (e.aggregate_id, e.seq, e.type, e.version, e.data) for e in events
        ]
        assert {e.id for e in again}.isdisjoint({e.id for e in events})  # new stored ids
        with pytest.raises(PromptConflictError, match=f"Session {root.id} already exists"):
            await import_events(rt, events)
        with pytest.raises(InvalidInputError, match="holds no events"):
            await import_events(rt, [])
