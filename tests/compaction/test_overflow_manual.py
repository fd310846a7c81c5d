"""Overflow-triggered and manual compaction over HTTP."""

from __future__ import annotations

import json

import trio
from jsonschema import Draft202012Validator

from tests.gateway.conftest import response_schema
from tests.gateway.test_cli import kittiwake

from .conftest import compacting, history, new_session, prompt, prompt_text, schema, start_mock

WINDOW = 2000


async def test_an_overflow_compacts_once_and_a_persistent_one_fails_without_looping(tmp_path):
    async with trio.open_nursery() as nursery:
        mock = await start_mock(nursery, WINDOW)
        # The provider's real limit is lower than the catalog says: the estimate misses it.
        mock.reject_over = 1200
        async with compacting(
            tmp_path, mock, config={"compaction": {"buffer": 400, "preserve_recent_tokens": 200}}
        ) as c:
            sid = await new_session(c.client, c.work)
            turns = 0
            while mock.overflows == 0:
                await prompt(c.client, sid, prompt_text(turns, 600))
                turns += 1
                assert turns < 20, mock.sizes
            rebuilt = mock.turns[-1]
            info = (await c.client.get(f"/api/session/{sid}")).json()["data"]
            assert "lastError" not in info, (
                info.get("lastError"),
                mock.overflows,
                len(mock.summaries),
                len(mock.turns),
                turns,
            )
            assert len(mock.summaries) == 1 and mock.overflows == 1
            assert len(mock.turns) == turns + 1  # one rejected attempt, then the rebuilt one
            assert f"PROMPT-{turns - 1} " in json.dumps(rebuilt["messages"][-1])
            assert "<conversation-checkpoint>" in json.dumps(rebuilt["messages"])
            events = await history(c.client, sid)
            kinds = [e["type"] for e in events]
            assert kinds.count("session.next.step.failed") == 1
            assert kinds.count("session.next.compaction.ended") == 1
            assert kinds[-1] == "session.next.step.ended"

            # From now on every turn overflows: one compaction, one rebuilt attempt, failed.
            mock.reject_over = 0
            sent, summaries = len(mock.turns), len(mock.summaries)
            await prompt(c.client, sid, prompt_text(turns, 600))
            assert len(mock.summaries) == summaries + 1
            assert len(mock.turns) == sent + 2
            info = (await c.client.get(f"/api/session/{sid}")).json()["data"]
            assert info["lastError"]["_tag"] == "ContextOverflowError"
            # Nothing keeps running: the session is idle, the drain did not go round again.
            assert (await c.client.get("/api/session/active")).json()["data"] == {}
        nursery.cancel_scope.cancel()


async def test_manual_compaction_over_the_v2_route_summarize_and_the_project_route(tmp_path):
    async with trio.open_nursery() as nursery:
        mock = await start_mock(nursery, 100_000)
        async with compacting(tmp_path, mock) as c:
            client = c.client
            sid = await new_session(client, c.work)
            # Nothing to compact yet: 204, and nothing is written.
            r = await client.post(f"/api/session/{sid}/compact")
            assert r.status_code == 204 and not r.content
            assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
            assert mock.summaries == []
            assert not [e for e in await history(client, sid) if "compaction" in e["type"]]

            await prompt(client, sid, prompt_text(0, 100))
            r = await client.post(f"/api/session/{sid}/compact")
            assert r.status_code == 204
            assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
            context = (await client.get(f"/api/session/{sid}/context")).json()["data"]
            assert [m["type"] for m in context] == ["compaction"]
            assert context[0]["reason"] == "manual" and "FACT-f0" in context[0]["summary"]
            assert "PROMPT-0 " in context[0]["recent"]

            await prompt(client, sid, prompt_text(1, 100))
            r = await client.post(
                f"/session/{sid}/summarize", json={"providerID": "local", "modelID": "small"}
            )
            assert r.status_code == 200 and r.json() is True
            assert_summarize = response_schema("/session/{sessionID}/summarize", "post", 200)
            Draft202012Validator(assert_summarize).validate(r.json())
            assert len(mock.summaries) == 2
            assert "FACT-f0" in json.dumps(mock.summaries[1]["messages"])  # the first summary
            bad = await client.post(f"/session/{sid}/summarize", json={"providerID": 3})
            assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
            missing = await client.post("/session/ses_nothere/summarize", json={})
            assert missing.status_code == 404

            await prompt(client, sid, prompt_text(2, 100))
            pid = (await client.get("/project/current")).json()["id"]
            r = await client.post(f"/project/{pid}/session/{sid}/compact")
            assert r.status_code == 200 and r.json() is True
            assert len(mock.summaries) == 3
            listed = (await client.get(f"/project/{pid}/session/{sid}/message")).json()
            checkpoints = [i for i in listed if i["parts"][0]["type"] == "compaction"]
            assert len(checkpoints) == 3
            for item in checkpoints:
                Draft202012Validator(schema("UserMessage")).validate(item["info"])
                Draft202012Validator(schema("CompactionPart")).validate(item["parts"][0])
                assert item["parts"][0]["auto"] is False

            await prompt(client, sid, prompt_text(3, 100))
            done = await kittiwake("sessions", "compact", sid, "--attach", c.server.url)
            assert done.returncode == 0, done.stderr.decode()
            assert done.stdout.decode() == f"compacted {sid}\n"
            assert len(mock.summaries) == 4

            # The session goes on from the checkpoint.
            await prompt(client, sid, "and now?")
            last = mock.turns[-1]["messages"]
            assert "<conversation-checkpoint>" in json.dumps(last)
            assert "PROMPT-0 " not in json.dumps(last)
            events = await history(client, sid)
        nursery.cancel_scope.cancel()
    ended = [e for e in events if e["type"] == "session.next.compaction.ended"]
    assert [e["data"]["reason"] for e in ended] == ["manual"] * 4
    for event in ended:
        Draft202012Validator(schema("SessionNextCompactionEnded")).validate(event)
