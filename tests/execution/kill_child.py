"""A runtime process for kill tests: starts a tool that never finishes, then waits to die.

Usage: python kill_child.py DATA_DIR WORK_DIR [--no-queue]
Prints ``TOOL`` once the tool runs and ``QUEUED <message id>`` once a queued prompt
is admitted (with resume=False; not with ``--no-queue``), then sleeps until killed.
"""

from __future__ import annotations

import sys

import trio

from runtime import Location, Prompt, llm, open_runtime
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import TestingGates, testing_registry
from tests.execution.conftest import eventually


async def main(data_dir: str, work_dir: str, queue: bool) -> None:
    gates = TestingGates()
    script = [
        [llm.StepStart(), llm.ToolCall(call_id="c1", name="gated", input={"key": "never"})],
    ]

    def tools(env: ToolEnvironment) -> ToolRegistry:
        return testing_registry(env, gates=gates)[0]

    async with open_runtime(data_dir=data_dir, llm=llm.ScriptedLLM(script), tools=tools) as rt:
        info = await rt.sessions.create(id="ses_kill", location=Location(directory=work_dir))
        await rt.sessions.prompt(info.id, prompt=Prompt(text="work"), id="msg_work")
        await eventually(lambda: bool(gates.started))
        print("TOOL", flush=True)
        if not queue:
            await trio.sleep_forever()
        queued = await rt.sessions.prompt(
            info.id, prompt=Prompt(text="pending"), id="msg_pending", delivery="queue", resume=False
        )
        print("QUEUED", queued.id, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], "--no-queue" not in sys.argv[3:])
