"""Plugins and the rest of a session's life: its events, going idle, a failed run, commands,
compaction, and the environment of shell commands (the ``shell`` tool and the user's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors import run_user_shell
from runtime import IdGenerator, llm
from runtime.llm import ScriptedLLM
from runtime.plugins import CompactionPrompt, hookimpl
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
