"""What the plugin hook layer costs: per tool call and per provider turn.

Usage: .venv/bin/python bench/plugins.py [--calls N] [--pairs N] [--prompts N] [--starts N]

- per tool call: ``ToolRegistry.settle`` of a trivial tool with a permission (so
  ``permission_ask`` is asked), batches of N calls per configuration, the order swapped
  batch by batch: the registry without hooks (as before plugins), with the
  Location's plugins and none loaded (every Location now), with the example plugin
  (``examples/kittiwake-example-plugin``: its ``permission_ask`` answers each call), and
  with a plugin answering ``None`` on all three tool hooks (before, permission, after),
  and with ten such plugins;
- per turn: ``rt.sessions.prompt`` then ``wait_idle``, two real runtimes open at once
  (DuckDB, the scripted model answering text at once), one without plugins and one with
  the example plugin (its Context Source reads ``TEAM_NOTES.md`` in a worker thread at every
  turn, its tool is offered), a session each, prompted alternately;
- start-up: opening a runtime (configuration on) until its Location's plugins are loaded,
  without plugins and with ten plugin files (a tool and ``permission_ask`` each),
  alternately first.

Each line: both medians and the median paired overhead (``bench/_pairs.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio

from runtime import Location, Prompt, open_runtime
from runtime.agents import AgentInfo, PermissionRule
from runtime.context import SystemContextRegistry
from runtime.llm import (
    LLMEvent,
    LLMRequest,
    ModelRef,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    Usage,
    UserMessage,
)
from runtime.plugins import (
    LocationPlugins,
    PluginCandidate,
    PluginContext,
    ProcessLimits,
    hookimpl,
)
from runtime.tools import Tool, ToolContext, ToolEnvironment, ToolOutput, ToolRegistry, ToolSuccess

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples" / "kittiwake-example-plugin")]

from kittiwake_example_plugin import ExamplePlugin  # noqa: E402

from bench._pairs import first_is_off, pair_report  # noqa: E402

_ANSWER: Sequence[LLMEvent] = (
    StepStart(), TextStart(id="t"), TextDelta(id="t", delta="done"), TextEnd(id="t"),
    StepFinish(finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=1)),
)  # fmt: skip


class Probe(msgspec.Struct, frozen=True):
    text: str


async def _probe(data: Probe, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
    return ToolOutput(content=[TextPart(text=data.text)])


class Silent:
    """A plugin on every tool hook, answering nothing."""

    name = "silent"

    @hookimpl
    def tool_execute_before(self, call: Any, args: Any) -> None:
        return None

    @hookimpl
    def permission_ask(self, permission: Any) -> None:
        return None

    @hookimpl
    def tool_execute_after(self, call: Any, result: Any) -> None:
        return None


def _context(directory: str) -> Any:
    def make(candidate: PluginCandidate) -> PluginContext:
        return PluginContext(
            name=candidate.name, client=None, project=directory, directory=directory,
            worktree=directory, server_url=lambda: None, options={}, limits=ProcessLimits(),
        )  # fmt: skip

    return make


registry_host: dict[int, LocationPlugins] = {}


async def _registry(
    directory: str, plugins: list[Any] | None, nursery: trio.Nursery
) -> ToolRegistry:
    env = ToolEnvironment(directory=directory, data_dir=directory, offload_io=False)
    registry = ToolRegistry(env)
    registry.contribute(
        Tool(
            name="probe", description="probe", input_type=Probe, handler=_probe, permission="probe"
        )
    )
    if plugins is None:
        return registry
    host = LocationPlugins(
        directory,
        registry=registry,
        context=SystemContextRegistry(),
        make_context=_context(directory),
    )
    registry_host[id(registry)] = host
    nursery.start_soon(host.run)
    candidates = [
        PluginCandidate(
            name=getattr(p, "name", None) or p.__name__,
            source="embedded",
            origin="bench",
            target=p,
        )
        for p in plugins
    ]
    host.sync(candidates, {})
    await host.wait_ready()
    return registry


async def _calls(registry: ToolRegistry, n: int) -> list[float]:
    agent = AgentInfo(name="build", permission=[PermissionRule(permission="*", action="allow")])
    times: list[float] = []
    for i in range(n):
        ctx = ToolContext(session_id="ses_1", agent="build", assistant_message_id="msg_1",
                          tool_call_id=f"call_{i}", directory=registry.env.directory)  # fmt: skip
        started = time.perf_counter()
        settled = await registry.settle("probe", {"text": "x"}, ctx, agent=agent)
        times.append(time.perf_counter() - started)
        assert isinstance(settled, ToolSuccess), settled
    return times


async def tool_calls(calls: int, pairs: int) -> list[str]:
    """Batches of *calls* settle calls on each configuration, *pairs* times, the order
    swapped every pair; each configuration against the registry without hooks."""
    configurations: dict[str, list[Any] | None] = {
        "no hook layer": None, "hook layer, no plugin": [],
        "example plugin": [ExamplePlugin], "a plugin on every tool hook": [Silent()],
        "ten plugins on every tool hook": [
            type(f"Silent{i}", (Silent,), {"name": f"silent{i}"})() for i in range(10)
        ],
    }  # fmt: skip
    samples: dict[str, list[float]] = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory() as folder:
        async with trio.open_nursery() as nursery:
            registries = {
                name: await _registry(folder, plugins, nursery)
                for name, plugins in configurations.items()
            }
            for registry in registries.values():
                await _calls(registry, 50)  # warm up
            for pair in range(pairs):
                order = list(registries.items())
                for name, registry in order if first_is_off(pair) else reversed(order):
                    samples[name].append(statistics.median(await _calls(registry, calls)))
            nursery.cancel_scope.cancel()
    base = samples["no hook layer"]
    return [
        pair_report(f"  {name}", base, samples[name], unit="us", scale=1e6)
        for name in list(configurations)[1:]
    ]


async def _runtime(folder: Path, plugins: list[Any]) -> Any:
    work = folder / "work"
    work.mkdir(parents=True)
    (work / "TEAM_NOTES.md").write_text("Deploys are frozen until Friday.\n")

    def script(request: LLMRequest) -> Sequence[LLMEvent]:
        return _ANSWER

    return open_runtime(data_dir=folder / "data", llm=ScriptedLLM(script), plugins=plugins), work


async def _prompt(rt: Any, sid: str, text: str) -> float:
    started = time.perf_counter()
    await rt.sessions.prompt(sid, prompt=Prompt(text=text))
    await rt.sessions.wait_idle(sid)
    return time.perf_counter() - started


async def turns(pairs: int) -> str:
    """Two runtimes at once, without and with the example plugin, a session each; *pairs*
    prompts to idle on each, alternately first."""
    with tempfile.TemporaryDirectory() as folder:
        off_opening, off_work = await _runtime(Path(folder) / "off", [])
        on_opening, on_work = await _runtime(Path(folder) / "on", [ExamplePlugin])
        async with off_opening as off_rt, on_opening as on_rt:
            sides = []
            for rt, work in ((off_rt, off_work), (on_rt, on_work)):
                sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
                for i in range(5):  # the first open the Location and warm up
                    await _prompt(rt, sid, f"warm {i}")
                sides.append((rt, sid))
            off: list[float] = []
            on: list[float] = []
            for pair in range(pairs):
                order = [(sides[0], off), (sides[1], on)]
                for (rt, sid), into in order if first_is_off(pair) else reversed(order):
                    into.append(await _prompt(rt, sid, f"prompt {pair}"))
    return pair_report("  example plugin", off, on, unit="ms", scale=1e3)


async def turn_calls(iterations: int) -> str:
    """The hook layer's own work in one provider turn of a Location without plugins: the
    drain's readiness wait, the request passing the request hooks, the turn's committed
    events (about 8) offered to the event hooks, and the idle notice."""
    request = LLMRequest(
        model=ModelRef(provider_id="p", model_id="m"), system=["s"],
        messages=[UserMessage(content=[TextPart(text="hi")])],
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        async with trio.open_nursery() as nursery:
            registry = await _registry(folder, [], nursery)
            host = registry_host[id(registry)]
            times: list[float] = []
            for _ in range(iterations):
                started = time.perf_counter()
                await host.wait_ready()
                await host.transform_request(request, "ses_1", "build")
                for seq in range(8):
                    host.notify_event("session.next.text.ended", "ses_1", seq, b"{}")
                host.notify_idle("ses_1")
                times.append(time.perf_counter() - started)
            nursery.cancel_scope.cancel()
    return f"  hook layer, no plugin: {statistics.median(times) * 1e6:.2f} us per turn (median)"


PLUGIN_FILE = """
from runtime.plugins import hookimpl

@hookimpl
def tool():
    def {name}_tool(text: str) -> str:
        \"\"\"Echo the text.\"\"\"
        return text
    return [{name}_tool]

@hookimpl
def permission_ask(permission):
    return None
"""


async def _start(folder: Path, plugins: int) -> float:
    """Seconds from opening a runtime (configuration on, a fresh data dir) until its
    Location's plugins are loaded: *plugins* files in ``.kittiwake/plugins/``."""
    from actors import Configuration

    work = folder / "work"
    (work / ".kittiwake" / "plugins").mkdir(parents=True)
    for i in range(plugins):
        (work / ".kittiwake" / "plugins" / f"p{i}.py").write_text(PLUGIN_FILE.format(name=f"p{i}"))
    configuration = Configuration(env={"HOME": str(folder), "XDG_CONFIG_HOME": str(folder)})
    started = time.perf_counter()
    async with open_runtime(
        data_dir=folder / "data", llm=ScriptedLLM([]), configuration=configuration
    ) as rt:
        location = await rt.execution.location(str(work))
        await location.ready()
        elapsed = time.perf_counter() - started
        assert len(location.plugins.statuses()) == plugins
    return elapsed


async def start_up(pairs: int) -> str:
    """Opening a runtime and its Location without plugins and with ten plugin files,
    *pairs* times each, alternately first."""
    off: list[float] = []
    on: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for pair in range(pairs + 2):
            order = [(0, off), (10, on)]
            for plugins, into in order if first_is_off(pair) else reversed(order):
                taken = await _start(Path(folder) / f"{pair}-{plugins}", plugins)
                if pair >= 2:  # the first two warm the imports up
                    into.append(taken)
    return pair_report("  ten plugin files", off, on, unit="ms", scale=1e3)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="settle calls per batch")
    parser.add_argument("--pairs", type=int, default=30, help="batches per configuration")
    parser.add_argument("--prompts", type=int, default=300, help="prompt pairs")
    parser.add_argument("--starts", type=int, default=30, help="start-up pairs")
    args = parser.parse_args()
    print(f"per tool call (medians of {args.pairs} batches of {args.calls}, against no hooks):")
    for line in await tool_calls(args.calls, args.pairs):
        print(line)
    print("per turn, the hook layer's own calls:")
    print(await turn_calls(args.calls * args.pairs))
    print(f"per turn ({args.prompts} prompts to idle each, against no plugin):")
    print(await turns(args.prompts))
    print(f"start-up ({args.starts} pairs, against no plugin):")
    print(await start_up(args.starts))


if __name__ == "__main__":
    trio.run(main)
