"""A runtime process for the kill tests of the session tools, killed by the test.

Usage: python task_child.py DATA_DIR WORK_DIR [task|question]

``task``: a parent's task call runs a subagent child whose tool never finishes; prints
``TOOL`` once it runs. ``question``: the session's question tool waits for an answer; prints
``ASKED`` once the question is stored.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import trio

from runtime import Location, Prompt, llm, open_runtime
from runtime.tools import ToolEnvironment, ToolRegistry
from runtime.tools.testing import TestingGates, testing_registry
from tests.execution.conftest import eventually, published, tool_calls, user_texts

COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
}


def script(request: llm.LLMRequest) -> Sequence[llm.LLMEvent]:
    if user_texts(request)[-1] == "ask":
        return tool_calls(("q1", "question", {"questions": [COLOR]}))
    if user_texts(request)[-1] == "wait forever":
        return tool_calls(("g1", "gated", {"key": "never"}))
    task = {"description": "wait", "prompt": "wait forever", "subagent_type": "general"}
    return tool_calls(("c1", "task", task))


async def main(data_dir: str, work_dir: str, mode: str) -> None:
    gates = TestingGates()

    def tools(env: ToolEnvironment) -> ToolRegistry:
        return testing_registry(env, gates=gates)[0]

    async with open_runtime(data_dir=data_dir, llm=llm.ScriptedLLM(script), tools=tools) as rt:
        info = await rt.sessions.create(id="ses_parent", location=Location(directory=work_dir))
        if mode == "question":
            with rt.hub.subscribe(info.id) as sub:
                await rt.sessions.prompt(info.id, prompt=Prompt(text="ask"))
                await published(sub, "question.v2.asked")
            print("ASKED", flush=True)
            await trio.sleep_forever()
        await rt.sessions.prompt(info.id, prompt=Prompt(text="delegate"))
        await eventually(lambda: bool(gates.started))
        print("TOOL", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "task")
