"""Where a Location's blocking reads run: configuration and agent files, custom tools."""

from __future__ import annotations

import threading

import trio
import trio.testing

from actors import Configuration
from actors._runtime import default_tools
from runtime import Location, open_runtime
from runtime.llm import ScriptedLLM
from runtime.tools import ToolEnvironment, ToolRegistry
from tests.execution.conftest import answer, prompt


def _recording(threads: list[int]):
    def tools(env: ToolEnvironment) -> ToolRegistry:
        threads.append(threading.get_ident())
        return default_tools(env)

    return tools


async def test_a_location_is_opened_in_a_worker_thread_once_for_concurrent_callers(tmp_path):
    threads: list[int] = []
    agents = tmp_path / "work" / ".kittiwake" / "agent"
    agents.mkdir(parents=True)
    (agents / "review.md").write_text("---\ndescription: reviews\n---\nReview the change.\n")
    options = dict(tools=_recording(threads), configuration=Configuration(env={}))
    async with open_runtime(data_dir=tmp_path / "data", llm=None, **options) as rt:
        directory = str(tmp_path / "work")
        opened = []
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(lambda: _append(opened, rt.execution.location(directory)))
        assert len(opened) == 3 and all(o is opened[0] for o in opened)
        assert "review" in opened[0].agents
    assert threads and threads != [threading.get_ident()]
    assert len(threads) == 1  # one opening shared by the three callers


async def test_inline_loads_stay_on_the_trio_thread(tmp_path):
    threads: list[int] = []
    llm = ScriptedLLM(lambda request: answer("ok"))
    options = dict(tools=_recording(threads), location_loads="inline")
    async with open_runtime(data_dir=tmp_path / "data", llm=llm, **options) as rt:
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        await rt.sessions.prompt(info.id, prompt=prompt("hi"))
        await rt.sessions.wait_idle(info.id)
    assert threads == [threading.get_ident()]


async def test_a_cancelled_opening_still_opens_the_location_once(tmp_path):
    release = threading.Event()
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()
    calls: list[int] = []

    def tools(env: ToolEnvironment) -> ToolRegistry:
        calls.append(1)
        if len(calls) == 1:
            trio.from_thread.run_sync(started.set, trio_token=token)
            release.wait(10)
        return default_tools(env)

    async with open_runtime(data_dir=tmp_path / "data", llm=None, tools=tools) as rt:
        directory = str(tmp_path)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rt.execution.location, directory)
                await started.wait()
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                release.set()  # the read is not abandoned: the cancel waits for it
        assert scope.cancelled_caught
        location = await rt.execution.location(directory)
        assert location.directory == directory and calls == [1]  # the read was kept


async def _append(into, awaitable) -> None:
    into.append(await awaitable)
