"""A plugin's failure is contained: a hook that raises, times out or answers nonsense is
logged, published as ``plugin.error`` and skipped; a broken plugin fails to load with an
error that says why; only a required plugin's failure fails the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from actors import Notice
from runtime.llm import ScriptedLLM
from runtime.plugins import PluginLimits, hookimpl
from tests.execution.conftest import answer, prompt, tool_calls
from tests.plugins.conftest import Recorder, plugin_runtime, session
from tests.plugins.test_tool_calls import results

FAST = PluginLimits(hook_timeout=0.2, init_timeout=5.0)


class Raising:
    name = "raising"

    @hookimpl
    def tool_execute_before(self, call: Any, args: Any) -> Any:
        raise RuntimeError("boom")


class Hanging:
    name = "hanging"

    @hookimpl
    async def permission_ask(self, permission: Any) -> str:
        await trio.sleep_forever()
        return "deny"


class Nonsense:
    name = "nonsense"

    @hookimpl
    def permission_ask(self, permission: Any) -> str:
        return "maybe"


async def notices(rt: Any, received: list[Notice], task_status: Any) -> None:
    with rt.hub.subscribe(None) as sub:
        task_status.started()
        while True:
            item = await sub.receive()
            if isinstance(item, Notice) and item.type == "plugin.error":
                received.append(item)


async def test_failing_hooks_are_skipped_reported_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("a\n")
    recorder = Recorder()
    client = ScriptedLLM([tool_calls(("c1", "read", {"filePath": "a.txt"})), answer()])
    plugins = [Raising(), Hanging(), Nonsense(), recorder]
    received: list[Notice] = []
    async with plugin_runtime(tmp_path, client, plugins=plugins, plugin_limits=FAST) as (rt, work):
        async with trio.open_nursery() as nursery:
            await nursery.start(notices, rt, received)
            sid = await session(rt, work)
            await rt.sessions.prompt(sid, prompt=prompt("go"))
            await rt.sessions.wait_idle(sid)
            nursery.cancel_scope.cancel()
        statuses = {s.name: s for s in (await rt.execution.location(str(work))).plugins.statuses()}
    [(tool, text, failed)] = results(client.requests[1])
    assert (tool, failed) == ("read", False) and "a" in text
    assert recorder.asked == [("read", "read", ["a.txt"], "allow")]  # still asked, after
    errors = {(n.properties["name"], n.properties["hook"]): n.properties["error"] for n in received}
    assert errors == {
        ("raising", "tool_execute_before"): "RuntimeError: boom",
        ("hanging", "permission_ask"): "timed out after 0.2 s",
        ("nonsense", "permission_ask"): "answered 'maybe', not one of ('allow', 'deny', 'ask')",
    }
    assert all(n.directory == str(tmp_path / "work") for n in received)
    assert statuses["raising"].error == "tool_execute_before: RuntimeError: boom"
    assert statuses["raising"].errors == 1 and statuses["raising"].state == "ready"
    assert statuses["recorder"].error is None


class RequiredPolicy:
    name = "required-policy"
    required = True

    @hookimpl
    def permission_ask(self, permission: Any) -> str:
        raise RuntimeError("policy store unreachable")


async def test_a_required_plugins_failing_hook_fails_the_call(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("a\n")
    client = ScriptedLLM([tool_calls(("c1", "read", {"filePath": "a.txt"})), answer()])
    async with plugin_runtime(tmp_path, client, plugins=[RequiredPolicy()]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
    [(tool, text, failed)] = results(client.requests[1])
    assert failed and "Permission denied" in text


class Unknown:
    name = "unknown"

    @hookimpl
    def tool_excute_before(self, call: Any) -> None:  # misspelled
        return None


class Unmarked:
    name = "unmarked"

    def permission_ask(self, permission: Any) -> str:  # no @hookimpl: would never run
        return "deny"


class Wrapper:
    name = "wrapper"

    @hookimpl(wrapper=True)
    def chat_params(self, chat: Any, params: Any) -> Any:
        return (yield)


def failing_factory(context: Any, options: dict[str, Any]) -> Any:
    raise ValueError(f"missing option 'token' (got {sorted(options)})")


class BadSignature:
    name = "bad-signature"

    @hookimpl
    def permission_ask(self, permission: Any, verdict: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("plugin", "error"),
    [
        (Unknown(), "unknown hook 'tool_excute_before'"),
        (Unmarked(), "'permission_ask' is not marked @hookimpl"),
        (Wrapper(), "hook 'chat_params' is a wrapper (not supported)"),
        (failing_factory, "ValueError: missing option 'token' (got [])"),
        (BadSignature(), "verdict"),
    ],
)
async def test_a_broken_plugin_fails_to_load_and_says_why(
    tmp_path: Path, plugin: Any, error: str
) -> None:
    recorder = Recorder()
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[plugin, recorder]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        broken, fine = (await rt.execution.location(str(work))).plugins.statuses()
    assert broken.state == "failed" and broken.hooks == []
    assert broken.error is not None and broken.error.startswith("load: ") and error in broken.error
    assert fine.state == "ready" and fine.name == "recorder"
    assert fine.hooks == ["permission_ask", "tool_execute_after", "tool_execute_before"]
    assert client.requests  # the session ran
