"""Added latency of an ``edit`` with language-server diagnostics against one without.

Run: .venv/bin/python bench/lsp.py [--runs R]

A Location with one Python file; the same edit (toggled back and forth) is settled R
times through a registry without an edit observer, then through one whose
``LanguageServers`` runs python-lsp-server (pyflakes), already started and the file
open. Reports medians, and the first diagnosed edit (server start included) apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from runtime.agents import BUILD
from runtime.tools import (
    LanguageServers,
    LspLimits,
    ServerSpec,
    ToolContext,
    ToolEnvironment,
    ToolSuccess,
    location_registry,
)

PYLSP = ServerSpec(name="pylsp", command=[sys.executable, "-m", "pylsp"], extensions=[".py"])


TOGGLES = [0]


async def edits(registry, ctx, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        TOGGLES[0] += 1
        old, new = ("alpha", "beta") if TOGGLES[0] % 2 else ("beta", "alpha")
        start = time.perf_counter()
        result = await registry.settle(
            "edit",
            {"filePath": "mod.py", "oldString": old, "newString": new, "replaceAll": True},
            ctx,
            agent=BUILD,
        )
        times.append(time.perf_counter() - start)
        assert isinstance(result, ToolSuccess), result
    return times


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "loc"
        root.mkdir()
        (root / "mod.py").write_text("def alpha():\n    return 1\n\n\nalpha()\n" * 20)
        ctx = ToolContext(session_id="s", agent="build", assistant_message_id="m",
                          tool_call_id="c", directory=str(root))  # fmt: skip
        env = ToolEnvironment(directory=str(root), data_dir=str(Path(tmp) / "data"))
        plain = await edits(location_registry(env), ctx, runs)
        servers = LanguageServers(str(root), lambda: [PYLSP], lambda: LspLimits())
        registry = location_registry(env)
        registry.edit_observer = servers
        async with trio.open_nursery() as nursery:
            await nursery.start(servers.run)
            first = await edits(registry, ctx, 1)
            diagnosed = await edits(registry, ctx, runs)
            nursery.cancel_scope.cancel()
    without, with_ = statistics.median(plain), statistics.median(diagnosed)
    print(f"edit without diagnostics (median of {runs}): {without * 1000:8.1f} ms")
    print(f"edit with diagnostics    (median of {runs}): {with_ * 1000:8.1f} ms")
    print(f"added latency (difference of medians):     {(with_ - without) * 1000:8.1f} ms")
    print(f"first diagnosed edit (server start):        {first[0] * 1000:8.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    trio.run(main, parser.parse_args().runs)
