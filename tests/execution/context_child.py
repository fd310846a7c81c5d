"""A runtime process for the context crash test.

Usage: python context_child.py DATA_DIR WORK_DIR
Runs one answered turn, changes two Context Sources, prompts again and prints
``UPDATED`` once the combined ``context.updated`` event is durable; the provider
call that follows never returns, so the parent kills the process there.
"""

from __future__ import annotations

import sys

import trio

from runtime import Location, Prompt, llm, open_runtime
from tests.execution.conftest import answer
from tests.execution.context_sources import file_context


class HangingSecondTurn:
    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: llm.LLMRequest):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls > 1:
            await trio.sleep_forever()
        for event in answer("first"):
            yield event


async def main(data_dir: str, work_dir: str) -> None:
    context = file_context(work_dir)
    async with open_runtime(data_dir=data_dir, llm=HangingSecondTurn(), context=context) as rt:
        info = await rt.sessions.create(id="ses_ctx", location=Location(directory=work_dir))
        await rt.sessions.prompt(info.id, prompt=Prompt(text="one"))
        await rt.sessions.wait_idle(info.id)
        for name, value in (("mode", "slow"), ("region", "us")):
            with open(f"{work_dir}/{name}.txt", "w") as handle:  # noqa: ASYNC230
                handle.write(value)
        await rt.sessions.prompt(info.id, prompt=Prompt(text="two"))
        async for item in rt.sessions.events(info.id):
            if item.event.__struct_config__.tag == "session.next.context.updated":
                print("UPDATED", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
