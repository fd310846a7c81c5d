"""Run tool-calling sessions until killed, interrupting some turns; log every provider request.

Usage: python turn_child.py DATA_DIR WORK_DIR REQUESTS SEED [--final]

Sessions ``ses_turn<i>`` (created if absent) take prompts in a loop; their provider (a
local script at the ``LLMClient`` seam) calls the ``slow`` tool for a while, then answers.
About a third of the prompts are followed by an interrupt. Sessions that need a resume
after a crash are resumed at start, or prompted. Every request is appended to REQUESTS
(one JSON line, written before the stream starts) so a killed process leaves the record.
Prints ``ready`` once started. With ``--final``: resume or prompt every session once, wait
until all are idle, print ``done`` and exit.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import AsyncIterator

import msgspec
import trio

from runtime import Location, Prompt, ResumeNotNeededError, llm, open_runtime
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import testing_registry

SESSIONS = 3


class ToolLoop:
    """Calls ``slow`` one or two at a time for a few turns, then answers in text."""

    def __init__(self, path: str, seed: int) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._rng = random.Random(seed)
        self._encode = msgspec.json.Encoder().encode

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        os.write(self._fd, self._encode(request) + b"\n")
        rng = self._rng
        yield llm.StepStart()
        await trio.sleep(rng.uniform(0, 0.03))
        last = request.messages[-1] if request.messages else None
        wants_tools = isinstance(last, llm.UserMessage) or rng.random() < 0.5
        if request.tools and wants_tools:
            yield llm.TextStart(id="t")
            yield llm.TextDelta(id="t", delta="Let me ")
            await trio.sleep(rng.uniform(0, 0.01))  # an interrupt may cut the text here
            yield llm.TextDelta(id="t", delta="look.")
            yield llm.TextEnd(id="t")
            for _ in range(rng.choice([1, 1, 2])):
                call = f"call_{rng.getrandbits(48):012x}"
                seconds = round(rng.uniform(0.02, 0.25), 3)
                yield llm.ToolCall(call_id=call, name="slow", input={"seconds": seconds})
                await trio.sleep(rng.uniform(0, 0.02))
            yield llm.StepFinish(finish_reason="tool-calls", usage=llm.Usage())
            return
        yield llm.TextStart(id="a")
        yield llm.TextDelta(id="a", delta="All done ")
        await trio.sleep(rng.uniform(0, 0.01))
        yield llm.TextDelta(id="a", delta=f"after {len(request.messages)} messages.")
        yield llm.TextEnd(id="a")
        await trio.sleep(rng.uniform(0, 0.02))
        yield llm.StepFinish(finish_reason="stop", usage=llm.Usage(input_tokens=1))


async def main(data_dir: str, work_dir: str, requests: str, seed: int, final: bool) -> None:
    rng = random.Random(seed)

    def tools(env: ToolEnvironment) -> ToolRegistry:
        return testing_registry(env)[0]

    client = ToolLoop(requests, seed)
    async with open_runtime(data_dir=data_dir, llm=client, tools=tools) as rt:
        ids = [f"ses_turn{i}" for i in range(SESSIONS)]
        for sid in ids:
            await rt.sessions.create(id=sid, location=Location(directory=work_dir))
        cut = set(await rt.sessions.needs_resume())
        print("ready", flush=True)
        tag = f"{os.getpid()}-{seed}"

        async def resume(sid: str, *, wait: bool) -> None:
            try:
                await rt.sessions.resume(sid, wait=wait, if_needed=True)
            except ResumeNotNeededError:
                pass

        if final:
            for sid in ids:
                if sid in cut:
                    await resume(sid, wait=True)
                await rt.sessions.prompt(sid, prompt=Prompt(text=f"{sid} {tag} final"))
                await rt.sessions.wait_idle(sid)
            print("done", flush=True)
            return

        async def drive(sid: str) -> None:
            if sid in cut and rng.random() < 0.5:
                await resume(sid, wait=False)
            n = 0
            while True:
                n += 1
                delivery = rng.choice(["steer", "steer", "queue"])
                text = f"{sid} {tag} {n}"
                await rt.sessions.prompt(sid, prompt=Prompt(text=text), delivery=delivery)  # type: ignore[arg-type]
                roll = rng.random()
                if roll < 0.35:
                    await trio.sleep(rng.uniform(0, 0.3))
                    await rt.sessions.interrupt(sid)
                elif roll < 0.85:
                    await rt.sessions.wait_idle(sid)
                else:
                    await trio.sleep(rng.uniform(0, 0.05))

        async with trio.open_nursery() as nursery:
            for sid in ids:
                nursery.start_soon(drive, sid)


if __name__ == "__main__":
    trio.run(
        main, sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), "--final" in sys.argv[5:]
    )
