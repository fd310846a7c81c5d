"""System Context reconcile latency when nothing changed.

Run: .venv/bin/python bench/context.py [--iterations N]

Measures, for the 4 built-in sources over real AGENTS.md files and for 50
synthetic sources: a full reconcile (registry producers + loaders + compare) and
the pure compare/render step alone on already-loaded values.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from runtime.context import (
    Initialized,
    ObservedContext,
    Snapshot,
    SystemContext,
    SystemContextRegistry,
    Unchanged,
    contribute_core_context,
    skill_guidance_source,
)

SKILLS = [(f"skill-{i}", f"Does task number {i} carefully and well.") for i in range(12)]


def _summary(label: str, samples_ns: list[int]) -> str:
    ordered = sorted(samples_ns)
    median = statistics.median(ordered) / 1000
    p95 = ordered[int(len(ordered) * 0.95) - 1] / 1000
    return f"{label:<56} median {median:8.1f} us   p95 {p95:8.1f} us   (n={len(ordered)})"


async def _time_async(fn: Callable[[], Awaitable[object]], n: int) -> list[int]:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        outcome = await fn()
        samples.append(time.perf_counter_ns() - start)
        assert outcome == Unchanged(), outcome
    return samples


def _time_pure(observed: ObservedContext, snapshot: Snapshot, n: int) -> list[int]:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        outcome = observed.reconcile(snapshot)
        samples.append(time.perf_counter_ns() - start)
        assert outcome == Unchanged(), outcome
    return samples


def _project(base: Path) -> tuple[Path, Path, Path]:
    root, config = base / "project", base / "config"
    directory = root / "packages" / "app"
    directory.mkdir(parents=True)
    config.mkdir()
    (root / ".git").mkdir()
    rules = "\n".join(f"- Rule {i}: keep functions short and typed." for i in range(60))
    for where in (config, root, directory):
        (where / "AGENTS.md").write_text(f"# Rules for {where.name}\n{rules}\n", encoding="utf-8")
    return root, directory, config


def _synthetic(count: int) -> SystemContext:
    def source(i: int) -> SystemContext:
        value = f"value {i} " * 20

        async def load() -> str:
            return value

        return SystemContext.make(f"bench/s{i}", str, load, lambda v: v, lambda v: "now " + v)

    return SystemContext.combine(*(source(i) for i in range(count)))


async def _measure(label: str, load: Callable[[], Awaitable[SystemContext]], n: int) -> None:
    initial = await (await load()).initialize()
    assert isinstance(initial, Initialized)
    snapshot = initial.snapshot

    async def full() -> object:
        return await (await load()).reconcile(snapshot)

    observed = await (await load()).observe()
    await _time_async(full, 50)
    print(_summary(f"{label}: full reconcile (load + compare)", await _time_async(full, n)))
    print(_summary(f"{label}: pure reconcile step", _time_pure(observed, snapshot, n * 4)))
    print(f"{label}: baseline size {len(initial.baseline.encode())} bytes")


async def main(iterations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, directory, config = _project(Path(tmp))
        for label, git in (("4 built-ins", None), ("4 built-ins, git known", True)):
            registry = SystemContextRegistry()
            contribute_core_context(
                registry,
                directory=directory,
                project_root=root,
                config_dir=config,
                env={},
                is_git_repo=git,
            )

            async def builtins(registry: SystemContextRegistry = registry) -> SystemContext:
                return SystemContext.combine(await registry.load(), skill_guidance_source(SKILLS))

            await _measure(label, builtins, iterations)

    synthetic = _synthetic(50)

    async def fifty() -> SystemContext:
        return synthetic

    await _measure("50 sources", fifty, iterations)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=2000)
    trio.run(main, parser.parse_args().iterations)
