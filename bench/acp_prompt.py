"""``kittiwake acp`` (in process and ``--attach``ed to ``kittiwake serve``) against ``opencode
acp``: a prompt to its first ``agent_message_chunk`` and to its answer.

Run: .venv/bin/python bench/acp_prompt.py [--runs 20] [--chunks 10] [--delay 0.02] [--no-opencode]

Needs ``make opencode`` for ``opencode acp`` (the pinned ``opencode-ai`` in
``clients/node_modules``; ``--no-opencode`` leaves it out).

One local chat-completions mock (the tests' ``LocalServer`` on a thread of its own) answers
every agent: each answer is ``--chunks`` SSE chunks, ``--delay`` seconds apart (by default
10 chunks 20 ms apart: the provider streams for 0.18 s). The agents are configured with the
same ``@ai-sdk/openai-compatible`` provider, each in a project and home of its own, OpenCode
with its update checks, models.dev fetch, default plugins, LSP downloads and sharing turned
off (as ``bench/tui.py`` runs it), so none reaches beyond 127.0.0.1.

The client is a minimal newline-delimited JSON-RPC client on the agent's pipes (trio and
msgspec; no SDK, so its own cost stays out of the figures). Per agent: spawn to the answer
of ``initialize`` (start-up), ``session/new``, two warm-up prompts, then ``--runs`` prompts
per agent in one session each, interleaved, the order alternating per run. Per prompt the
clock starts when the ``session/prompt`` line is written: **first chunk** is the first
``agent_message_chunk`` read, **answer** the prompt's response (after its last update).
Medians and p90 are printed, in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._opencode import OFFLINE  # noqa: E402
from tests.editor_acp.harness import catalog  # noqa: E402
from tests.llm.conftest import Recorded, Reply  # noqa: E402
from tests.opencode.harness import OPENCODE, Provider, client_env, said  # noqa: E402


def streaming(chunks: int, delay: float) -> Any:
    def respond(request: Recorded) -> Reply:
        return said(*[f"w{n} " for n in range(chunks)], delay=delay)

    return respond


class Agent:
    """One ACP agent process and a line client on its pipes."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name, self.argv, self.cwd, self.env = name, argv, cwd, env
        self.process: trio.Process | None = None
        self._next = 0
        self._waiting: dict[int, trio.Event] = {}
        self._answers: dict[int, Any] = {}
        self.first_chunk: float | None = None
        self.session = ""
        self.startup = 0.0
        self.log = cwd.parent / f"{name.replace(' ', '-')}.err"

    async def start(self, nursery: trio.Nursery) -> None:
        began = time.perf_counter()
        self.process = await trio.lowlevel.open_process(
            self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log.open("ab"),
        )  # fmt: skip
        nursery.start_soon(self._read)
        await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.startup = time.perf_counter() - began
        new = await self.call("session/new", {"cwd": str(self.cwd), "mcpServers": []})
        self.session = new["sessionId"]

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        buffer = b""
        while chunk := await self.process.stdout.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = msgspec.json.decode(line)
                if "id" in message and "method" not in message:
                    self._answers[message["id"]] = message
                    self._waiting.pop(message["id"]).set()
                elif message.get("method") == "session/update":
                    kind = message["params"]["update"]["sessionUpdate"]
                    if kind == "agent_message_chunk" and self.first_chunk is None:
                        self.first_chunk = time.perf_counter()
                elif "id" in message:  # a request of the agent's: allow whatever it asks
                    answer = {"outcome": {"outcome": "selected", "optionId": "once"}}
                    await self._write({"jsonrpc": "2.0", "id": message["id"], "result": answer})

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        await self.process.stdin.send_all(msgspec.json.encode(message) + b"\n")

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        self._next += 1
        done = self._waiting[self._next] = trio.Event()
        await self._write({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        with trio.fail_after(120):
            await done.wait()
        answer = self._answers.pop(self._next)
        if "error" in answer:
            raise RuntimeError(f"{self.name}: {method}: {answer['error']}")
        return answer["result"]

    async def prompt(self, text: str) -> tuple[float, float]:
        """One prompt: ms to its first chunk and to its answer."""
        self.first_chunk = None
        began = time.perf_counter()
        params = {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]}
        result = await self.call("session/prompt", params)
        ended = time.perf_counter()
        assert result["stopReason"] == "end_turn", result
        assert self.first_chunk is not None, f"{self.name}: no agent_message_chunk"
        return (self.first_chunk - began) * 1000, (ended - began) * 1000

    async def stop(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            await self.process.stdin.aclose()
            with trio.move_on_after(30):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()


def kittiwake_dir(tmp: Path, port: int) -> tuple[Path, dict[str, str]]:
    project, data = tmp / "project", tmp / "data"
    project.mkdir(parents=True)
    data.mkdir()
    (data / "models-dev.json").write_text(json.dumps(catalog(port)))
    env = {**os.environ, "HOME": str(tmp), "KITTIWAKE_DATA_DIR": str(data),
           "LOCAL_API_KEY": "sk-local", "KITTIWAKE_MODEL": "local/m1"}  # fmt: skip
    env.pop("KITTIWAKE_SERVER_PASSWORD", None)
    return project, env


def opencode_dir(tmp: Path, port: int) -> tuple[Path, dict[str, str]]:
    project = tmp / "project"
    project.mkdir(parents=True)
    config = {
        "$schema": "https://opencode.ai/config.json", "model": "local/m1",
        "share": "disabled", "autoupdate": False,
        "provider": {"local": {
            "npm": "@ai-sdk/openai-compatible", "name": "Local",
            "options": {"baseURL": f"http://127.0.0.1:{port}/v1"},
            "models": {"m1": {"name": "Mock One", "tool_call": True,
                              "limit": {"context": 400000, "output": 1000}}},
        }},
    }  # fmt: skip
    (project / "opencode.json").write_text(json.dumps(config))
    return project, {**client_env(tmp), **OFFLINE}


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"{statistics.median(ordered):,.0f} / {p90:,.0f}"


async def measure(agents: list[Agent], runs: int) -> dict[str, list[tuple[float, float]]]:
    """Start every agent, warm it up, then prompt them in turn; each one's figures."""
    figures: dict[str, list[tuple[float, float]]] = {a.name: [] for a in agents}
    async with trio.open_nursery() as nursery:
        for agent in agents:
            await agent.start(nursery)
            for _ in range(2):
                await agent.prompt("warm up")
        for run in range(runs):
            order = agents if run % 2 == 0 else list(reversed(agents))
            for agent in order:
                figures[agent.name].append(await agent.prompt(f"bench {run}"))
        for agent in agents:
            await agent.stop()
    return figures


def main(args: argparse.Namespace) -> None:
    provider = Provider(streaming(args.chunks, args.delay)).start()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-"))
    python = [sys.executable, "-m", "gateway"]
    embedded_dir, embedded_env = kittiwake_dir(tmp / "embedded", provider.port)
    served_dir, served_env = kittiwake_dir(tmp / "attached", provider.port)
    agents = [Agent("kittiwake acp", [*python, "acp"], embedded_dir, embedded_env)]
    server = subprocess.Popen(
        [*python, "serve", "--port", "0"], cwd=served_dir, env=served_env,
        stdout=subprocess.PIPE, stderr=(tmp / "serve.err").open("ab"),
    )  # fmt: skip
    try:
        assert server.stdout is not None
        found = re.search(r"serving (http://\S+)", server.stdout.readline().decode())
        assert found is not None, (tmp / "serve.err").read_text()
        agents.append(
            Agent("kittiwake acp --attach", [*python, "acp", "--attach", found.group(1)],
                  served_dir, served_env)
        )  # fmt: skip
        if args.opencode:
            oc_dir, oc_env = opencode_dir(tmp / "opencode", provider.port)
            agents.append(Agent("opencode acp", [str(OPENCODE), "acp"], oc_dir, oc_env))
        figures = trio.run(measure, agents, args.runs)
    finally:
        server.terminate()
        server.wait(30)
        provider.stop()
    load = os.getloadavg()[0]
    print(f"{args.runs} prompts per agent; {args.chunks} chunks {args.delay * 1000:.0f} ms "
          f"apart; load average {load:.1f}; median / p90, ms")  # fmt: skip
    print(f"{'agent':<24} {'start-up':>10} {'first chunk':>16} {'answer':>16}")
    for agent in agents:
        firsts = [first for first, _ in figures[agent.name]]
        answers = [answer for _, answer in figures[agent.name]]
        print(f"{agent.name:<24} {agent.startup * 1000:>8,.0f}ms {summary(firsts):>16} "
              f"{summary(answers):>16}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.02)
    parser.add_argument("--no-opencode", dest="opencode", action="store_false")
    main(parser.parse_args())
