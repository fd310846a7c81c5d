"""``compaction.prune``: old local tool results leave the request, durably and once."""

from __future__ import annotations

import json

import msgspec

from actors import Configuration
from runtime import llm
from runtime import messages as m
from runtime.history import PRUNED_RESULT
from storage import AllEvents
from tests.execution.conftest import answer, prompt, running, tool_calls


def _results(request: llm.LLMRequest) -> dict[str, str]:
    return {
        part.call_id: part.content[0].text  # type: ignore[union-attr]
        for message in request.messages
        if isinstance(message, llm.ToolMessage)
        for part in message.content
    }


async def test_old_tool_results_are_pruned_beyond_the_protected_newest(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "kittiwake.json").write_text(json.dumps({"compaction": {"prune": True}}))
    big = "y" * 40_000  # 10000 tokens each
    scripts = [tool_calls((f"c{i}", "echo", {"text": big})) for i in range(1, 8)]
    client = llm.ScriptedLLM([*scripts, answer("read them"), answer("more"), answer("again")])
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with running(tmp_path, client, configuration=configuration) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("work"))
        await rt.sessions.wait_idle(sid)
        assert all(text == big for text in _results(client.requests[7]).values())  # same turn
        await rt.sessions.prompt(sid, prompt=prompt("more"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(sid, prompt=prompt("again"))
        await rt.sessions.wait_idle(sid)
        page = await rt.sessions.messages(sid, limit=200, order="asc")
        events = [e.type for e in await rt.storage.read(AllEvents()) if e.aggregate_id == sid]
    results = _results(client.requests[8])
    assert [call for call, text in sorted(results.items()) if text == PRUNED_RESULT] == [
        "c1", "c2", "c3",
    ]  # fmt: skip
    assert all(results[f"c{i}"] == big for i in range(4, 8))
    assert _results(client.requests[9]) == results  # nothing more to prune, nothing again
    assert [e for e in events if e == "session.tool.results.pruned"] == [
        "session.tool.results.pruned"
    ]
    tools = [
        part
        for message in page.data
        if isinstance(message, m.AssistantMessage)
        for part in message.content
        if isinstance(part, m.AssistantTool)
    ]
    pruned = {tool.id for tool in tools if tool.time.pruned is not msgspec.UNSET}
    assert pruned == {"c1", "c2", "c3"}
    assert all(tool.state.content[0].text == big for tool in tools)  # messages keep everything
