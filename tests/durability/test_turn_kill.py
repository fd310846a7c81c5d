"""SIGKILL processes running tool-calling turns, interrupts mixed in: every request sent to
the provider afterwards is one it accepts, and every turn a kill cut ends closed."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from msgspec import UNSET

from runtime import llm
from runtime import messages as m
from storage import EventStore
from tests.cpu import CpuTime
from tests.provider_rules import lost_answers, request_problems

CHILD = Path(__file__).with_name("turn_child.py")
REPO = Path(__file__).resolve().parents[2]
KILLS = 14


def _run(data: Path, work: Path, requests: Path, seed: int, *, kill_after: float | None) -> None:
    """Run the child; SIGKILL it *kill_after* seconds after ``ready`` (0: as it starts),
    or, with ``None``, let its ``--final`` run finish."""
    final = ["--final"] if kill_after is None else []
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(data), str(work), str(requests), str(seed), *final],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        if kill_after is None:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0 and out.split() == ["ready", "done"], out
            return
        if kill_after > 0:
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(kill_after)
        else:
            time.sleep(random.Random(seed).uniform(0.3, 0.9))  # during start-up, recovery
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


def _requests(path: Path) -> list[llm.LLMRequest]:
    decode = msgspec.json.Decoder(llm.LLMRequest).decode
    lines = path.read_bytes().split(b"\n")[:-1]  # a killed write leaves at most a partial tail
    return [decode(line) for line in lines]


# Fifteen real processes: about 30 s, a minute at a load of 12; the timeout only guards
# against a hang.
@pytest.mark.timeout(600)
def test_kills_and_interrupts_during_tool_turns_leave_requests_providers_accept(
    tmp_path: Path,
) -> None:
    rng = random.Random(0x7A11)
    data, work, log = tmp_path / "data", tmp_path / "work", tmp_path / "requests.jsonl"
    work.mkdir()
    cpu = CpuTime()
    for kill in range(KILLS):
        early = kill % 5 == 4
        _run(data, work, log, rng.getrandbits(32), kill_after=0 if early else rng.uniform(0.3, 1.2))
    _run(data, work, log, rng.getrandbits(32), kill_after=None)
    spent = cpu.spent()

    store = EventStore.open(data)
    try:
        sessions = [f"ses_turn{i}" for i in range(3)]
        histories = {sid: [msg for _, msg in store.history(sid)] for sid in sessions}
        stored = store.conn.execute("select type from event").fetchall()
        types = Counter(r[0].rsplit(".", 1)[0] for r in stored)  # "<type>.<version>"
        assert store.sessions_needing_resume() == []
    finally:
        store.close()

    requests = _requests(log)
    problems = []
    for number, request in enumerate(requests):
        history = histories[request.prompt_cache_key or ""]
        for problem in request_problems(request) + lost_answers(request, history):
            problems.append((number, problem))
    assert problems == []

    interrupted_tools = 0
    for history in histories.values():
        for message in history:
            if not isinstance(message, m.AssistantMessage):
                continue
            assert isinstance(message.time.completed, int), message  # every turn closed
            for part in message.content:
                if isinstance(part, m.AssistantTool):
                    assert isinstance(part.state, m.ToolCompleted | m.ToolError), part
                    if isinstance(part.state, m.ToolError):
                        interrupted_tools += 1
        assert isinstance(history[-1], m.AssistantMessage) and history[-1].finish == "stop"
        assert history[-1].error is UNSET

    # What the run covered: kills that cut turns, interrupts, tool calls, many requests.
    assert types["session.resume.needed"] >= 3, types
    assert types["session.next.interrupt.requested"] >= 10, types
    assert interrupted_tools >= 5
    assert types["session.next.tool.success"] >= 20, types
    assert len(requests) >= 60
    # CPU s of this and its children: about 11 at a load of 6, more on a quiet machine (the
    # children run turns for fixed lengths of time before each kill).
    assert spent < 60
