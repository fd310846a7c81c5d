"""One compaction attempt embedded: live-only deltas, a span per attempt, and an interrupted
or failed attempt leaving the previous boundary."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from actors import Configuration
from runtime import llm
from runtime import messages as m
from runtime.compaction import COMPACTION_PROMPT
from runtime.events import CompactionDelta
from runtime.telemetry import recording
from storage import AllEvents
from tests.execution.conftest import GatedLLM, answer, prompt, running, user_texts
from tests.waiting import eventually


def _summary(text: str) -> list[llm.LLMEvent]:
    return [
        llm.StepStart(),
        llm.TextStart(id="s"),
        llm.TextDelta(id="s", delta=text[:5]),
        llm.TextDelta(id="s", delta=text[5:]),
        llm.TextEnd(id="s"),
        llm.StepFinish(finish_reason="stop", usage=llm.Usage()),
    ]


def _failed() -> list[llm.LLMEvent]:
    return [llm.StepStart(), llm.ProviderError(kind="terminal", message="no summary today")]


async def test_an_interrupted_then_a_failed_attempt_keep_the_boundary_and_one_completes(tmp_path):
    # Requests: 0 answer, 1 summary (held, interrupted), 2 summary (fails), 3 summary, 4 answer.
    scripts = [answer("one"), _summary("x"), _failed(), _summary("## Goal\nFIRST"), answer("two")]
    client = GatedLLM(scripts, holds={1: "summary"})
    exporter = InMemorySpanExporter()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "kittiwake.json").write_text(json.dumps({}))
    configuration = Configuration(env={"HOME": str(tmp_path)})
    with recording(SimpleSpanProcessor(exporter)):
        async with running(tmp_path, client, configuration=configuration) as rt:
            sid = rt.test_session
            await rt.sessions.prompt(sid, prompt=prompt("hello"))
            await rt.sessions.wait_idle(sid)
            with rt.hub.subscribe(sid) as sub:
                await rt.sessions.compact(sid)
                await eventually(lambda: len(client.requests) == 2)
                await client.in_stream.wait()
                await rt.sessions.interrupt(sid)
                await rt.sessions.wait_idle(sid)
                assert [type(x) for x in await rt.sessions.context(sid)] == [
                    m.UserMessage, m.AssistantMessage,
                ]  # fmt: skip
                await rt.sessions.compact(sid)  # the summary fails: nothing changes
                await rt.sessions.wait_idle(sid)
                assert len(await rt.sessions.context(sid)) == 2
                await rt.sessions.compact(sid)
                await rt.sessions.wait_idle(sid)
                deltas = []
                while True:
                    try:
                        item = sub.receive_nowait()
                    except Exception:  # noqa: BLE001 - drained
                        break
                    if isinstance(item, CompactionDelta):
                        deltas.append(item.text)
            context = await rt.sessions.context(sid)
            await rt.sessions.prompt(sid, prompt=prompt("again"))
            await rt.sessions.wait_idle(sid)
            stored = [e.type for e in await rt.storage.read(AllEvents()) if e.aggregate_id == sid]
    assert [type(x) for x in context] == [m.CompactionMessage]
    assert context[0].summary == "## Goal\nFIRST"
    assert client.requests[3].system == [COMPACTION_PROMPT]
    assert user_texts(client.requests[4])[0].startswith("<conversation-checkpoint>")
    assert "".join(deltas) == "## Goal\nFIRST"  # live progress of the completed attempt
    assert "session.next.compaction.delta" not in stored
    assert stored.count("session.next.compaction.started") == 3
    assert stored.count("session.next.compaction.ended") == 1
    spans = [s for s in exporter.get_finished_spans() if s.name == "compaction"]
    outcomes = [s.attributes["compaction.outcome"] for s in spans]
    assert outcomes == ["interrupted", "failed", "completed"]
    assert all(s.attributes["compaction.reason"] == "manual" for s in spans)
    assert spans[2].attributes["compaction.tokens_after"] > 0
    assert spans[2].attributes["compaction.duration_ms"] >= 0


async def test_the_compaction_agent_prompt_and_model_are_configurable(tmp_path):
    client = llm.ScriptedLLM([answer("one"), _summary("## Goal\nCUSTOM"), answer("two")])
    work = tmp_path / "work"
    work.mkdir()
    agent = {"compaction": {"prompt": "CUSTOM COMPACTOR", "model": "lab/summarizer"}}
    (work / "kittiwake.json").write_text(json.dumps({"agent": agent}))
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with running(tmp_path, client, configuration=configuration) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("hello"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.compact(sid)
        await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(sid, prompt=prompt("again"))
        await rt.sessions.wait_idle(sid)
    summary = client.requests[1]
    assert summary.system == ["CUSTOM COMPACTOR"]
    assert (summary.model.provider_id, summary.model.model_id) == ("lab", "summarizer")
    assert summary.tools == [] and summary.generation.max_output_tokens == 4096
    assert client.requests[2].model != summary.model  # the session's model answers


async def test_an_overflow_after_output_fails_the_turn_without_compacting(tmp_path):
    overflow = llm.ProviderError(kind="context_overflow", message="prompt is too long")
    cut = [llm.StepStart(), llm.TextStart(id="t"), llm.TextDelta(id="t", delta="par"), overflow]
    client = llm.ScriptedLLM([answer("one"), cut])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("hello"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(sid, prompt=prompt("more"))
        await rt.sessions.wait_idle(sid)
        info = await rt.sessions.get(sid)
        stored = [e.type for e in await rt.storage.read(AllEvents()) if e.aggregate_id == sid]
    assert len(client.requests) == 2  # no summary request, no second attempt
    assert "session.next.compaction.started" not in stored
    assert info.last_error.tag == "ContextOverflowError"  # type: ignore[union-attr]


def test_compaction_settings_come_from_the_configuration(tmp_path):
    from actors.session._config import location_watch
    from runtime.compaction import CompactionSettings

    def settings(document: dict) -> CompactionSettings:
        (tmp_path / "kittiwake.json").write_text(json.dumps(document))
        watch = location_watch(str(tmp_path), Configuration(env={"HOME": str(tmp_path)}))
        return watch.load_now().compaction()

    assert settings({}) == CompactionSettings()
    assert settings({"compaction": {"reserved": 5}}).buffer == 5
    chosen = settings(
        {"compaction": {"auto": False, "prune": True, "buffer": 7, "reserved": 5,
                        "preserve_recent_tokens": 0}}
    )  # fmt: skip
    assert (chosen.auto, chosen.prune, chosen.buffer, chosen.keep_tokens) == (False, True, 7, 0)
    assert chosen.tail_turns is None
    assert settings({"compaction": {"tail_turns": 0}}).tail_turns == 0


async def test_tail_turns_in_the_configuration_bounds_the_checkpoints_recent_context(tmp_path):
    async def recent(config: dict, name: str) -> str:
        client = llm.ScriptedLLM([answer("one"), answer("two"), _summary("## Goal\nG")])
        (tmp_path / name / "work").mkdir(parents=True)
        (tmp_path / name / "work" / "kittiwake.json").write_text(json.dumps(config))
        configuration = Configuration(env={"HOME": str(tmp_path)})
        async with running(tmp_path / name, client, configuration=configuration) as rt:
            sid = rt.test_session
            for text in ("FIRST-PROMPT", "SECOND-PROMPT"):
                await rt.sessions.prompt(sid, prompt=prompt(text))
                await rt.sessions.wait_idle(sid)
            await rt.sessions.compact(sid)
            await rt.sessions.wait_idle(sid)
            [checkpoint] = await rt.sessions.context(sid)
        assert isinstance(checkpoint, m.CompactionMessage) and checkpoint.summary == "## Goal\nG"
        return checkpoint.recent

    unbounded = await recent({}, "unset")
    assert "FIRST-PROMPT" in unbounded and "SECOND-PROMPT" in unbounded
    last_turn = await recent({"compaction": {"tail_turns": 1}}, "one")
    assert "FIRST-PROMPT" not in last_turn and "SECOND-PROMPT" in last_turn and "two" in last_turn
    assert await recent({"compaction": {"tail_turns": 0}}, "none") == ""


async def test_auto_off_neither_compacts_over_budget_nor_after_an_overflow(tmp_path):
    overflow = [llm.StepStart(), llm.ProviderError(kind="context_overflow", message="too long")]
    limit = llm.ModelLimit(context=100, output=10)  # every request is over budget
    client = llm.ScriptedLLM([answer("one"), answer("two"), overflow], limit=limit)
    work = tmp_path / "work"
    work.mkdir()
    (work / "kittiwake.json").write_text(json.dumps({"compaction": {"auto": False}}))
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with running(tmp_path, client, configuration=configuration) as rt:
        sid = rt.test_session
        for text in ("a", "b", "c"):
            await rt.sessions.prompt(sid, prompt=prompt(text))
            await rt.sessions.wait_idle(sid)
        info = await rt.sessions.get(sid)
    assert len(client.requests) == 3  # no summary request, no rebuilt attempt
    assert info.last_error.tag == "ContextOverflowError"  # type: ignore[union-attr]
