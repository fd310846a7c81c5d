"""A runtime process for the telemetry kill test: prompts in a loop, spans recorded.

Usage: python telemetry_child.py DATA_DIR WORK_DIR
Prints ``PROMPT <message id>`` after each prompt is admitted (durable) and ``FLUSHED <n>``
after the spans written so far (``n``) are in the telemetry tables; never stops by itself.
"""

from __future__ import annotations

import sys

import trio

from runtime import Location, Prompt, llm, open_runtime
from storage import TelemetryOptions
from tests.execution.conftest import answer


async def main(data_dir: str, work_dir: str) -> None:
    client = llm.ScriptedLLM(lambda request: answer("ok"))
    options = TelemetryOptions(flush_interval=0.005, batch_max=16, sample=1.0)
    async with open_runtime(data_dir=data_dir, llm=client, telemetry=options) as rt:
        info = await rt.sessions.create(location=Location(directory=work_dir))
        for turn in range(1_000_000):
            receipt = await rt.sessions.prompt(info.id, prompt=Prompt(text=f"p{turn}"))
            print("PROMPT", receipt.id, flush=True)
            if turn == 2:
                await rt.sessions.wait_idle(info.id)
                assert rt.telemetry is not None
                await trio.to_thread.run_sync(rt.telemetry.force_flush)
                print("FLUSHED", rt.telemetry.written, flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
