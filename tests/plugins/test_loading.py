"""Where plugins come from (entry points, the ``plugin`` key, plugin folders), in which
order, each once; what a plugin is given; reloading with the configuration; readiness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from runtime import Location, Prompt
from runtime.llm import ScriptedLLM
from runtime.plugins import PluginContext, hookimpl, parse_plugin_entry
from storage import PendingInputs
from tests.execution.conftest import answer, prompt
from tests.plugins.conftest import plugin_runtime, session
from tests.waiting import eventually

DEMO = '''
from runtime.plugins import hookimpl

made = []

class Plugin:
    def __init__(self, context, options):
        self.context, self.options = context, options
        made.append((context.directory, dict(options)))

    @hookimpl
    def tool(self):
        def demo_hello(name: str) -> str:
            """Say hello."""
            return f"{self.options.get('greeting', 'hello')} {name}"
        return [demo_hello]
'''

FILE_PLUGIN = '''
from runtime.plugins import hookimpl

@hookimpl
def tool():
    def {name}_tool() -> str:
        """A tool of {name}."""
        return "{name}"
    return [{name}_tool]
'''


def install(site: Path, dist: str, module: str, source: str, entry: str) -> None:
    """A distribution *dist* on *site* whose ``kittiwake.plugins`` entry point is *entry*."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[kittiwake.plugins]\n{entry}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def write_plugin(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(FILE_PLUGIN.replace("{name}", name))


def offered(client: ScriptedLLM, index: int = -1) -> set[str]:
    return {t.name for t in client.requests[index].tools}


async def test_every_source_loads_in_order_each_object_once(tmp_path: Path, site: Path) -> None:
    install(site, "demo-plugin", "demo_plugin_a", DEMO, "demo = demo_plugin_a:Plugin")
    work = tmp_path / "work"
    write_plugin(work / "local", "relative")
    write_plugin(tmp_path / "xdg" / "kittiwake" / "plugins", "globalfile")
    write_plugin(work / ".kittiwake" / "plugins", "projectfile")
    config = {"plugin": [["demo-plugin@1.0", {"greeting": "hi"}], "./local/relative.py"]}
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, config=config) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        statuses = (await rt.execution.location(str(work))).plugins.statuses()
    import demo_plugin_a  # type: ignore[import-not-found]

    assert [(s.name, s.source, s.state) for s in statuses] == [
        ("demo", "entrypoint", "ready"), ("relative", "config", "ready"),
        ("globalfile", "file", "ready"), ("projectfile", "file", "ready"),
    ]  # fmt: skip
    assert statuses[0].origin == "demo-plugin: demo_plugin_a:Plugin"
    assert demo_plugin_a.made == [(str(work), {"greeting": "hi"})]  # once, with its options
    assert {"demo_hello", "relative_tool", "globalfile_tool", "projectfile_tool"} <= offered(client)


class Introspect:
    """Made with its context: checks what the runtime hands a plugin."""

    name = "introspect"
    seen: dict[str, Any] = {}

    def __init__(self, context: PluginContext, options: dict[str, Any]) -> None:
        self.context = context

    @hookimpl
    async def tool(self) -> list[Any]:
        ran = await self.context.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        Introspect.seen.update(
            client=self.context.client, directory=self.context.directory,
            worktree=self.context.worktree, ran=(ran.code, ran.stdout, ran.stderr),
        )  # fmt: skip
        return []


async def test_a_plugin_gets_the_runtime_its_location_and_a_process_runner(tmp_path: Path) -> None:
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[Introspect]) as (rt, work):
        (work / ".git").mkdir()
        sub = work / "sub"
        sub.mkdir()
        sid = (await rt.sessions.create(location=Location(directory=str(sub)))).id
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        assert Introspect.seen["client"] is rt
    assert Introspect.seen["directory"] == str(sub)
    assert Introspect.seen["worktree"] == str(work)
    assert Introspect.seen["ran"] == (3, "out\n", "err\n")


async def test_an_unknown_package_fails_to_load_and_says_how_to_install_it(tmp_path: Path) -> None:
    client = ScriptedLLM([answer()])
    config = {"plugin": ["no-such-kittiwake-plugin"]}
    async with plugin_runtime(tmp_path, client, config=config) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        [status] = (await rt.execution.location(str(work))).plugins.statuses()
    assert status.state == "failed" and status.error is not None
    assert "kittiwake plugin add no-such-kittiwake-plugin" in status.error


async def test_plugins_reload_with_the_configuration(tmp_path: Path) -> None:
    client = ScriptedLLM([answer(), answer(), answer()])
    work = tmp_path / "work"
    write_plugin(work / "local", "first")
    write_plugin(work / "local", "second")
    config: dict[str, Any] = {"plugin": ["./local/first.py"]}
    async with plugin_runtime(tmp_path, client, config=config) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        (work / "kittiwake.json").write_text(json.dumps({"plugin": ["./local/second.py"]}))
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        write_plugin(work / ".kittiwake" / "plugins", "added")
        await rt.sessions.prompt(sid, prompt=prompt("three"))
        await rt.sessions.wait_idle(sid)
        names = [s.name for s in (await rt.execution.location(str(work))).plugins.statuses()]
    assert "first_tool" in offered(client, 0) and "second_tool" not in offered(client, 0)
    assert "second_tool" in offered(client, 1) and "first_tool" not in offered(client, 1)
    assert {"second_tool", "added_tool"} <= offered(client, 2)
    assert names == ["second", "added"]


def test_plugin_entries_take_opencodes_forms() -> None:
    assert parse_plugin_entry("pkg") == ("pkg", {})
    assert parse_plugin_entry(["pkg", {"a": 1}]) == ("pkg", {"a": 1})
    for bad in (["pkg"], ["pkg", "x"], 3, ""):
        with pytest.raises(ValueError, match="a plugin entry is a name or"):
            parse_plugin_entry(bad)


class SlowRequired:
    """A required plugin that is ready only once the test says so."""

    name = "slow-required"
    required = True
    go = trio.Event()

    def __init__(self, context: PluginContext, options: dict[str, Any]) -> None:
        pass

    @hookimpl
    async def tool(self) -> None:
        await SlowRequired.go.wait()


async def test_sessions_wait_for_a_required_plugin_with_their_prompts_admitted(
    tmp_path: Path,
) -> None:
    SlowRequired.go = trio.Event()
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[SlowRequired]) as (rt, work):
        sid = await session(rt, work)
        receipt = await rt.sessions.prompt(sid, prompt=Prompt(text="go"))
        location = await rt.execution.location(str(work))
        await eventually(lambda: [s.state for s in location.plugins.statuses()] == ["loading"])
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        assert [p.id for p in pending] == [receipt.id] and client.requests == []
        SlowRequired.go.set()
        await rt.sessions.wait_idle(sid)
        await eventually(lambda: len(client.requests) == 1)
        await rt.sessions.wait_idle(sid)
    assert client.requests[0].messages


class BrokenRequired:
    name = "broken-required"
    required = True

    def __init__(self, context: PluginContext, options: dict[str, Any]) -> None:
        raise RuntimeError("cannot reach the licence server")


async def test_a_failed_required_plugin_keeps_sessions_from_starting(tmp_path: Path) -> None:
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[BrokenRequired]) as (rt, work):
        sid = await session(rt, work)
        receipt = await rt.sessions.prompt(sid, prompt=Prompt(text="go"))
        await rt.sessions.wait_idle(sid)
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        info = await rt.sessions.get(sid)
        [status] = (await rt.execution.location(str(work))).plugins.statuses()
    assert client.requests == []
    assert [p.id for p in pending] == [receipt.id]
    assert status.state == "failed" and status.required
    assert "required plugin broken-required failed" in str(info.last_error)


LIFECYCLE = """
import json
from runtime.context import SystemContext
from runtime.plugins import hookimpl

name = "team"  # its namespace, whatever the file is called

class Plugin:
    def __init__(self, context, options):
        self.log = options["log"]
        self.write({"made": options.get("round")})

    def write(self, entry):
        with open(self.log, "a") as handle:
            handle.write(json.dumps(entry) + "\\n")

    @hookimpl
    def config(self, config):
        self.write({"config": config.get("model")})

    @hookimpl
    def context_source(self):
        return SystemContext.loaded("team/status", str, "calm", lambda v: f"Status: {v}", str)

    @hookimpl
    def dispose(self):
        self.write({"disposed": True})

def plugin(context, options):
    made = Plugin(context, options)
    made.name = name
    return made
"""


async def test_config_and_dispose_follow_the_configuration(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    work = tmp_path / "work"
    (work / "local").mkdir(parents=True)
    (work / "local" / "lifecycle.py").write_text(LIFECYCLE)
    entry = ["./local/lifecycle.py", {"log": str(log), "round": 1}]
    client = ScriptedLLM([answer(), answer(), answer()])
    async with plugin_runtime(tmp_path, client, config={"plugin": [entry]}) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        (work / "kittiwake.json").write_text(json.dumps({"plugin": [entry], "model": "a/b"}))
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        entry = ["./local/lifecycle.py", {"log": str(log), "round": 2}]  # new options: remade
        (work / "kittiwake.json").write_text(json.dumps({"plugin": [entry], "model": "a/b"}))
        await rt.sessions.prompt(sid, prompt=prompt("three"))
        await rt.sessions.wait_idle(sid)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries == [
        {"made": 1}, {"config": None}, {"config": "a/b"},
        {"disposed": True}, {"made": 2}, {"config": "a/b"},
    ]  # fmt: skip
    assert "Status: calm" in client.requests[0].system[-1]  # accepted under "team/"
