"""Automatic compaction over HTTP: a long conversation on a small window stays under it."""

from __future__ import annotations

import json

import trio
from jsonschema import Draft202012Validator

from .conftest import (
    FACT,
    compacting,
    history,
    new_session,
    prompt,
    prompt_text,
    schema,
    start_mock,
)

WINDOW = 2000
CONFIG = {"compaction": {"buffer": 400, "preserve_recent_tokens": 300}}


def _users(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_a_long_conversation_compacts_twice_and_never_exceeds_the_window(tmp_path):
    async with trio.open_nursery() as nursery:
        mock = await start_mock(nursery, WINDOW)
        async with compacting(tmp_path, mock, config=CONFIG) as c:
            sid = await new_session(c.client, c.work)
            turns = 0
            while len(mock.summaries) < 2:
                await prompt(c.client, sid, prompt_text(turns, 600))
                turns += 1
                assert turns < 40, mock.sizes
            last = turns - 1
            info = (await c.client.get(f"/api/session/{sid}")).json()["data"]
            context = (await c.client.get(f"/api/session/{sid}/context")).json()["data"]
            messages = (
                await c.client.get(f"/api/session/{sid}/message", params={"limit": 200})
            ).json()["data"]
            events = await history(c.client, sid)
        nursery.cancel_scope.cancel()

    # No request over the window was ever sent, and none was rejected.
    assert mock.overflows == 0 and max(mock.sizes) <= WINDOW, mock.sizes
    assert "lastError" not in info
    # The newest prompt is a user message of the last request; the oldest is gone from it,
    # though its fact survives in the summary.
    final = mock.turns[-1]
    assert f"PROMPT-{last} " in _users(final)[-1]
    assert "PROMPT-0 " not in json.dumps(final["messages"])
    assert "FACT-f0" in json.dumps(final["messages"])
    assert "<conversation-checkpoint>" in _users(final)[0]
    # The answer arrived for every prompt.
    assert len(mock.turns) == turns

    # The second summarising request builds on the first summary.
    first, second = mock.summary_texts[0], mock.summary_texts[1]
    assert f"<previous-summary>\n{first}\n</previous-summary>" in _users(mock.summaries[1])[0]
    assert set(FACT.findall(first)) <= set(FACT.findall(second))
    assert "FACT-f0" in second

    # messages keep everything; context starts at the checkpoint.
    users = [m for m in messages if m["type"] == "user"]
    assert len(users) == turns
    assert [m["type"] for m in messages].count("compaction") == 2
    assert context[0]["type"] == "compaction" and context[0]["summary"] == second
    assert context[0]["reason"] == "auto"
    assert not any(m["type"] == "compaction" for m in context[1:])
    assert "PROMPT-0 " not in json.dumps(context)
    assert f"PROMPT-{last} " in json.dumps(context[1:])
    Draft202012Validator(schema("SessionMessageCompaction")).validate(context[0])

    # Durable events: started then ended, each valid against OpenCode's schema.
    kinds = [e["type"] for e in events if "compaction" in e["type"]]
    assert kinds == ["session.next.compaction.started", "session.next.compaction.ended"] * 2
    for event in events:
        if event["type"] == "session.next.compaction.started":
            Draft202012Validator(schema("SessionNextCompactionStarted")).validate(event)
        elif event["type"] == "session.next.compaction.ended":
            Draft202012Validator(schema("SessionNextCompactionEnded")).validate(event)
            assert event["durable"]["version"] == 2
            assert event["metadata"]["boundarySeq"] < event["durable"]["seq"]
