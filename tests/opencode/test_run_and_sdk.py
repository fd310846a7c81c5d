"""``opencode run --attach`` and a script on ``@opencode-ai/sdk`` against ``kittiwake serve``:
the pinned clients, real subprocesses, every V1 answer and event checked against OpenCode's
schemas."""

from __future__ import annotations

import json
import subprocess
from typing import Final

import httpx

from tests.gateway.conftest import assert_valid, component, response_schema

from .conftest import EventLog
from .harness import CLIENTS, ROOT, Kittiwake, client_env, opencode

RACED_RUNS: Final = 3
"""Runs of ``opencode run --attach`` a test allows for the client's own race: it reads its
event stream and the prompt's answer on two connections and exits once the answer is parsed,
so when both are readable at once it can exit before printing the stream's last events
(anomalyco/opencode#46896). The server holds the answer until every stream sent the idle
status and ``gateway.opencode._v1_events.SETTLE_GRACE`` after (seen failing about once in 40
runs at a load of 10 without the grace); a run that still printed only a prefix of the answer
is run again, and the test fails if every run did."""


def _attached_run(*args: str, env: dict[str, str], cwd, complete) -> list[str]:
    """``opencode run --attach`` until *complete(stdout)*, at most ``RACED_RUNS`` times; the
    stdout of each run."""
    outputs = []
    for _ in range(RACED_RUNS):
        done = opencode("run", *args, env=env, cwd=cwd)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
        if complete(done.stdout):
            return outputs
    raise AssertionError(f"every run printed a partial answer: {outputs!r}")


def test_run_attach_prints_the_answer_then_continues_with_c(kittiwake: Kittiwake, tmp_path):
    env = client_env(tmp_path)
    events = EventLog(kittiwake.url, "/event")
    expected = ["step_start", "text", "step_finish"]

    def printed(stdout: str) -> list[str]:
        types = [json.loads(line)["type"] for line in stdout.splitlines()]
        assert types == expected[: len(types)], stdout  # a prefix at worst, never another order
        return types

    try:
        as_json = _attached_run(
            "--attach", kittiwake.url, "--format", "json", "hi", "again", env=env,
            cwd=kittiwake.project, complete=lambda out: printed(out) == expected,
        )  # fmt: skip
        lines = [json.loads(line) for line in as_json[-1].splitlines()]
        for line in lines:
            assert_valid(line["part"], component("Part"))
        text = lines[1]["part"]
        assert text["text"] == "Hello from the mock." and "end" in text["time"]
        second = lines[0]["sessionID"]

        continued = _attached_run(
            "--attach", kittiwake.url, "-c", "once", "more", env=env, cwd=kittiwake.project,
            complete=lambda out: out.strip() == "Hello from the mock.",
        )  # fmt: skip
        assert all(out.strip() == "" for out in continued[:-1]), continued
        messages = httpx.get(f"{kittiwake.url}/session/{second}/message").json()
        assert_valid(messages, response_schema("/session/{sessionID}/message", "get", 200))
        users = [m["parts"][0]["text"] for m in messages if m["info"]["role"] == "user"]
        # -c continued the last session (once per run of it)
        assert users == ["hi again"] + ["once more"] * len(continued)
        # part ids of the message list are the ones the events announced, in creation order
        listed = [p["id"] for m in messages for p in m["parts"]]
        assert listed == sorted(listed)

        def announced(payloads: list[dict]) -> set[str]:
            return {
                e["properties"]["part"]["id"] for e in payloads
                if e["type"] == "message.part.updated"
                and e["properties"]["part"]["sessionID"] == second
            }  # fmt: skip

        # The stream is read on its own thread: the last part's event may still be on its
        # way when `run` has exited.
        events.wait_until(lambda payloads: set(listed) <= announced(payloads))
        assert set(listed) <= announced(events.payloads())
    finally:
        events.close()
    assert not events.invalid, events.invalid[:3]
    kinds = {e["type"] for e in events.payloads()}
    assert {"server.connected", "session.created", "message.updated", "message.part.updated",
            "message.part.delta", "session.status"} <= kinds  # fmt: skip


def test_sdk_creates_prompts_lists_and_reads_events(kittiwake: Kittiwake, tmp_path):
    entry = CLIENTS / "@opencode-ai" / "sdk" / "dist" / "index.js"
    script = ROOT / "tests" / "opencode" / "sdk_script.mjs"
    done = subprocess.run(
        ["node", str(script), kittiwake.url, str(entry)], capture_output=True, text=True,
        timeout=90, env=client_env(tmp_path),  # a hang guard
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert_valid(seen["session"], component("Session"))
    assert seen["session"]["title"] == "from the SDK"
    assert_valid(seen["reply"], response_schema("/session/{sessionID}/message", "post", 200))
    assert [p["type"] for p in seen["reply"]["parts"]] == ["step-start", "text", "step-finish"]
    assert seen["reply"]["parts"][1]["text"] == "Hello from the mock."
    assert_valid(seen["messages"], response_schema("/session/{sessionID}/message", "get", 200))
    assert [m["info"]["role"] for m in seen["messages"]] == ["user", "assistant"]
    sid = seen["session"]["id"]
    for event in seen["events"]:
        assert_valid(event, component("Event"))
    mine = [e for e in seen["events"] if e["properties"].get("sessionID") == sid]
    statuses = [e["properties"]["status"]["type"] for e in mine if e["type"] == "session.status"]
    assert statuses == ["busy", "idle"]
    deltas = "".join(e["properties"]["delta"] for e in mine if e["type"] == "message.part.delta")
    assert deltas == "Hello from the mock."
