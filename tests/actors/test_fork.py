"""Forking a session (``actors.fork_session``) on a real DuckDB store: every kind of
message is copied under a new id, an open step is closed as recovery would, pruned results
stay pruned and a compaction checkpoint keeps what it replaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from actors import fork_session, fork_title
from runtime import IdGenerator, open_runtime
from runtime import events as ev
from runtime import messages as msg
from runtime.history import visible_history
from runtime.llm import ScriptedLLM
from storage import Append, History

MODEL = ev.ModelRef(id="m", provider_id="p")


def _text(content: list[Any]) -> list[tuple[str, Any]]:
    """A message's content without what a fork may change (ids of messages)."""
    out: list[tuple[str, Any]] = []
    for item in content:
        if isinstance(item, msg.AssistantTool):
            out.append((item.id, type(item.state).__name__))
        else:
            out.append((item.id, item.text))
    return out


def _shape(rows: list[tuple[int, Any]]) -> list[tuple[str, Any]]:
    shapes: list[tuple[str, Any]] = []
    for _, m in rows:
        if isinstance(m, msg.AssistantMessage):
            shapes.append(("assistant", (_text(m.content), m.finish)))
        elif isinstance(m, msg.UserMessage):
            shapes.append(("user", m.text))
        elif isinstance(m, msg.CompactionMessage):
            shapes.append(("compaction", m.summary))
        else:
            shapes.append((type(m).__name__, None))
    return shapes


async def test_fork_copies_every_message_kind_and_closes_an_open_step(tmp_path: Path) -> None:
    ids = IdGenerator()
    async with open_runtime(data_dir=tmp_path / "data", llm=ScriptedLLM([])) as rt:
        src = await rt.sessions.create(location=ev.Location(directory=str(tmp_path)), title="t")
        sid = src.id
        u1, a1, a2, u2, a3, comp = (ids.new("msg") for _ in range(6))

        def at(**fields: Any) -> dict[str, Any]:
            return {"timestamp": 10, "session_id": sid, **fields}

        def step(mid: str) -> dict[str, Any]:
            return at(assistant_message_id=mid)

        prompt = ev.Prompt(text="first")
        first = [
            ev.PromptAdmitted(**at(), message_id=u1, prompt=prompt, delivery="queue"),
            ev.PromptPromoted(**at(), message_id=u1, prompt=prompt, time_created=10),
            ev.StepStarted(**step(a1), agent="build", model=MODEL),
            ev.ReasoningStarted(**step(a1), reasoning_id="r1"),
            ev.ReasoningEnded(**step(a1), reasoning_id="r1", text="hmm"),
            ev.TextStarted(**step(a1), text_id="t1"),
            ev.TextEnded(**step(a1), text_id="t1", text="reading"),
            ev.ToolCalled(**step(a1), call_id="c1", tool="read", input={"filePath": "a"}),
            ev.ToolSuccess(**step(a1), call_id="c1", content=[ev.ToolTextContent(text="A")]),
            ev.ToolCalled(**step(a1), call_id="c2", tool="read", input={"filePath": "b"}),
            ev.ToolFailed(**step(a1), call_id="c2", error=ev.SessionError(message="no b")),
            ev.StepEnded(**step(a1), finish="tool-calls"),
            ev.StepStarted(**step(a2), agent="build", model=MODEL),
            ev.TextStarted(**step(a2), text_id="t2"),
            ev.TextEnded(**step(a2), text_id="t2", text="done"),
            ev.StepEnded(**step(a2), finish="stop"),
        ]
        seqs = await rt.storage.write(Append(session_id=sid, events=first))
        boundary = seqs[2]  # the checkpoint replaces u1 and a1
        second = ev.Prompt(text="second")
        later = [
            ev.CompactionEnded(
                **at(),
                message_id=comp,
                reason="auto",
                text="summary",
                recent="",
                boundary_seq=boundary,
            ),  # fmt: skip
            ev.ToolResultsPruned(**at(), calls=[(a1, "c1")]),
            ev.PromptAdmitted(**at(), message_id=u2, prompt=second, delivery="queue"),
            ev.PromptPromoted(**at(), message_id=u2, prompt=second, time_created=10),
            ev.StepStarted(**step(a3), agent="build", model=MODEL),
            ev.ToolCalled(**step(a3), call_id="c3", tool="read", input={"filePath": "c"}),
        ]
        await rt.storage.write(Append(session_id=sid, events=later))
        source = await rt.storage.read(History(session_id=sid))

        fork = await fork_session(rt, sid, before=None, max_messages=100, ids=ids, now=20)
        assert fork.title == "t (fork #1)" and fork.parent_id is msgspec.UNSET
        copied = await rt.storage.read(History(session_id=fork.id))

        assert {m.id for _, m in copied}.isdisjoint(m.id for _, m in source)
        expected = _shape(source)
        expected[-1] = ("assistant", ([("c3", "ToolError")], "interrupted"))  # closed
        assert _shape(copied) == expected
        pruned = copied[1][1]
        assert isinstance(pruned, msg.AssistantMessage)
        assert pruned.content[2].time.pruned is not msgspec.UNSET  # type: ignore[union-attr]
        # the checkpoint still replaces the same messages
        assert (
            _shape(visible_history(copied, None))[:2] == _shape(visible_history(source, None))[:2]
        )
        assert [k for k, _ in _shape(visible_history(copied, None))] == [
            "compaction", "assistant", "user", "assistant",
        ]  # fmt: skip

        # before a message: the history up to it, exclusive
        part = await fork_session(rt, sid, before=u2, max_messages=100, ids=ids, now=21)
        assert len(await rt.storage.read(History(session_id=part.id))) == 4  # u1 a1 a2 checkpoint
        assert fork_title(fork_title("t")) == "t (fork #2)"
