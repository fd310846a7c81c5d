"""Plugins and the rest of a session's life: its events, going idle, a failed run, commands,
compaction, and the environment of shell commands (the ``shell`` tool and the user's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from actors import run_user_shell
from runtime import IdGenerator, llm
from runtime.llm import ScriptedLLM
from runtime.plugins import CompactionPrompt, PluginLimits, hookimpl
from tests.execution.conftest import answer, prompt, tool_calls, user_texts
from tests.plugins.conftest import plugin_runtime, session
from tests.plugins.test_tool_calls import results
from tests.waiting import eventually


class Watcher:
    name = "watcher"

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.idle: list[str] = []
        self.errors: list[tuple[str, str]] = []

    @hookimpl
    async def event(self, event: Any) -> None:
        self.events.append((event.type, event.session_id))

    @hookimpl
    def session_idle(self, session: Any) -> None:
        self.idle.append(session.session_id)

    @hookimpl
    def session_error(self, session: Any, error: str) -> None:
        self.errors.append((session.session_id, error))


async def test_events_idle_and_errors_reach_the_plugins(tmp_path: Path) -> None:
    watcher = Watcher()
    failing = [llm.StepStart(), llm.ProviderError(kind="terminal", message="model is down")]
    client = ScriptedLLM([answer(), failing])
    async with plugin_runtime(tmp_path, client, plugins=[watcher]) as (rt, work):
        await (await rt.execution.location(str(work))).ready()  # plugins live from here on
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        await eventually(lambda: watcher.idle == [sid])
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        await eventually(lambda: len(watcher.idle) == 2 and len(watcher.errors) == 1)
    types = [t for t, s in watcher.events if s == sid]
    assert types[:3] == [
        "session.created",
        "session.next.prompt.admitted",
        "session.next.prompt.promoted",
    ]
    assert "session.next.text.ended" in types and types[-1] == "session.run.failed"
    assert watcher.errors == [(sid, "model is down")]


class Shaping:
    name = "shaping"

    @hookimpl
    def command_execute_before(self, command: Any, text: str) -> str:
        return f"{text}\n(run by {command.command} with {command.arguments!r})"

    @hookimpl
    def session_compacting(self, compaction: CompactionPrompt) -> CompactionPrompt:
        return CompactionPrompt(context=["Keep the list of open tickets."])


async def test_commands_and_compactions_are_shaped(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".kittiwake" / "command").mkdir(parents=True)
    (work / ".kittiwake" / "command" / "hello.md").write_text("Say hello to $1.\n")
    summary = [llm.StepStart(), llm.TextStart(id="s"), llm.TextDelta(id="s", delta="## Goal"),
               llm.TextEnd(id="s"), llm.StepFinish(finish_reason="stop", usage=llm.Usage())]  # fmt: skip
    client = ScriptedLLM([answer("hi"), summary])
    async with plugin_runtime(tmp_path, client, plugins=[Shaping()]) as (rt, work):
        sid = await session(rt, work)
        receipt = await rt.tools.commands.run(sid, "hello", "kit")
        await rt.sessions.wait_idle(sid)
        await rt.sessions.compact(sid)
        await rt.sessions.wait_idle(sid)
    assert receipt.prompt.text == "Say hello to kit.\n(run by hello with 'kit')"
    assert user_texts(client.requests[0]) == [receipt.prompt.text]
    system = client.requests[1].system[0]
    assert system.endswith("\n\nKeep the list of open tickets.")
    assert system.startswith("You are the compaction agent")


class Environment:
    name = "environment"

    def __init__(self) -> None:
        self.infos: list[Any] = []

    @hookimpl
    def shell_env(self, info: Any) -> dict[str, str]:
        self.infos.append(info)
        return {"KITTIWAKE_TEAM": "gulls", "WHERE": info.cwd}


async def test_shell_commands_run_with_the_plugins_environment(tmp_path: Path) -> None:
    environment = Environment()
    (tmp_path / "work" / "sub").mkdir(parents=True)
    command = {"command": "echo $KITTIWAKE_TEAM $WHERE", "description": "env", "workdir": "sub"}
    client = ScriptedLLM([tool_calls(("c1", "shell", command)), answer()])
    async with plugin_runtime(tmp_path, client, plugins=[environment]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        ids = IdGenerator()
        _, assistant = await run_user_shell(
            rt, sid, "echo user $KITTIWAKE_TEAM", agent=None, model=None, ids=ids,
            now=lambda: 0,
        )  # fmt: skip
        history = await rt.sessions.context(sid)
    [(_, text, failed)] = results(client.requests[1])
    assert not failed and f"gulls {work / 'sub'}" in text
    user_shell = [x for x in history if getattr(x, "id", None) == assistant]
    assert "user gulls" in str(user_shell)
    assert [i.cwd for i in environment.infos] == [str(work / "sub"), str(work)]
    assert environment.infos[0].session_id == sid and environment.infos[0].call_id == "c1"


class Gate:
    """Keeps a drain going with a reminder each time it is about to stop."""

    name = "gate"

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    @hookimpl
    async def session_stopping(self, session: Any, continued: int) -> str:
        self.asked.append((session.session_id, continued))
        return f"Run the tests before you stop ({continued})."


class Quiet:
    name = "quiet"

    @hookimpl
    def session_stopping(self) -> None:
        return None


async def test_session_stopping_keeps_a_drain_going_up_to_its_limit(tmp_path: Path) -> None:
    gate, watcher = Gate(), Watcher()
    command = {"command": "true", "description": "nothing"}
    client = ScriptedLLM(
        [tool_calls(("c1", "shell", command)), answer("done"), answer("tested"), answer("sure")]
    )
    limits = PluginLimits(max_continuations=2)
    plugins = [Quiet(), gate, watcher]
    async with plugin_runtime(tmp_path, client, plugins=plugins, plugin_limits=limits) as (
        rt,
        work,
    ):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("build it"))
        await rt.sessions.wait_idle(sid)
        await eventually(lambda: watcher.idle == [sid])
        history = await rt.sessions.context(sid)
        info = await rt.sessions.get(sid)
    # asked once the turn after the tool call completed, then after each continuation,
    # until the limit: not after the tool call's turn, not a third time
    assert gate.asked == [(sid, 0), (sid, 1)]
    assert len(client.requests) == 4
    assert user_texts(client.requests[2])[-1] == "Run the tests before you stop (0)."
    assert user_texts(client.requests[3])[-1] == "Run the tests before you stop (1)."
    synthetic = [m.text for m in history if type(m).__name__ == "SyntheticMessage"]
    assert synthetic == ["Run the tests before you stop (0).", "Run the tests before you stop (1)."]
    assert not info.last_error


class Stuck:
    name = "stuck"
    required = True

    @hookimpl
    async def session_stopping(self) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


class Broken:
    name = "broken"

    @hookimpl
    def session_stopping(self) -> str:
        raise RuntimeError("no opinion today")


async def test_a_failing_session_stopping_lets_the_drain_stop(tmp_path: Path) -> None:
    watcher = Watcher()
    failing = [llm.StepStart(), llm.ProviderError(kind="terminal", message="model is down")]
    client = ScriptedLLM([answer("done"), failing])
    limits = PluginLimits(hook_timeout=0.2)
    async with plugin_runtime(
        tmp_path, client, plugins=[Stuck(), Broken(), watcher], plugin_limits=limits
    ) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        await rt.sessions.prompt(sid, prompt=prompt("two"))  # fails: not asked
        await rt.sessions.wait_idle(sid)
        await eventually(lambda: len(watcher.idle) == 2)
        statuses = (await rt.execution.location(str(work))).plugins.statuses()
    assert len(client.requests) == 2
    errors = {s.name: (s.error, s.errors) for s in statuses}
    assert errors["stuck"] == ("session_stopping: timed out after 0.2 s", 1)
    assert errors["broken"] == ("session_stopping: RuntimeError: no opinion today", 1)
