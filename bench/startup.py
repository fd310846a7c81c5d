"""Where ``kittiwake serve``'s start-up CPU and idle memory go: imports, DuckDB instances.

Run: .venv/bin/python bench/startup.py [--rounds 7]

Every figure is measured in fresh interpreters (this file with ``--child``), the median of
``--rounds``, the collector paused as ``kittiwake`` pauses it:

- imports: the CPU (``time.process_time``) and anonymous memory (``RssAnon``) of importing
  what ``kittiwake serve`` imports before it serves (``gateway.cli``, ``gateway.http._serve``,
  ``gateway._gateway``), split into the third-party and standard modules among them
  (imported first, in the order a serving process has them) and Kittiwake's own packages;
- DuckDB: with the event store's instance open (connect with its settings, one table),
  what the telemetry tables' file costs as a second instance (``TelemetryStore.open``'s
  settings) against attaching it to the first one: CPU of the opening thread, anonymous
  memory, the process's threads.

``--by-package`` ranks instead what each package's own modules cost when serve imports
them (CPU, anonymous and file-backed resident memory, each module's own share: the time
and pages of the modules it imports are theirs), by a loader that wraps every module's
execution (``importlib.abc``), medians of ``--rounds`` interpreters.

``bench/gateway.py --runs 0 --cold N`` measures the whole start (first 200, idle RSS).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the packages, not this folder's gateway.py
_SERVE: Final = ("gateway.cli", "gateway.http._serve", "gateway._gateway")
_OWN: Final = ("actors", "gateway", "runtime", "storage")


def _status(field: str) -> float:
    """A ``/proc/self/status`` figure in MiB (``Threads``: a count)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            value = int(line.split()[1])
            return value if field == "Threads" else value / 1024
    raise LookupError(field)


def _own(name: str) -> bool:
    return name.split(".")[0] in _OWN


def _child_modules() -> dict[str, float]:
    """Import what serve imports; print the modules besides Kittiwake's, in order."""
    before = set(sys.modules)
    for name in _SERVE:
        importlib.import_module(name)
    others = [m for m in sys.modules if m not in before and not _own(m)]
    return {"modules": float(len(sys.modules))} | {f"m:{m}": 0.0 for m in others}


def _child_imports(others: list[str]) -> dict[str, float]:
    """Import *others* (third-party and standard), then Kittiwake's packages."""
    anon, cpu = _status("RssAnon"), time.process_time()
    for name in others:
        try:
            importlib.import_module(name)
        except ImportError:  # a platform's module another one tries and skips
            pass
    third_anon, third_cpu = _status("RssAnon"), time.process_time()
    for name in _SERVE:
        importlib.import_module(name)
    own_anon, own_cpu = _status("RssAnon"), time.process_time()
    return {
        "third-party and standard: CPU ms": (third_cpu - cpu) * 1000,
        "third-party and standard: anonymous MiB": third_anon - anon,
        "Kittiwake's packages: CPU ms": (own_cpu - third_cpu) * 1000,
        "Kittiwake's packages: anonymous MiB": own_anon - third_anon,
        "modules": float(len(sys.modules)),
    }


class _Measured(importlib.abc.Loader):
    """Runs another loader's ``exec_module``, noting what the module's own code cost:
    CPU seconds, anonymous and file-backed MiB, less what the modules it imported cost."""

    def __init__(self, inner: importlib.abc.Loader, costs: dict[str, list[float]],
                 stack: list[list[float]]) -> None:  # fmt: skip
        self.inner, self.costs, self.stack = inner, costs, stack

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        before = (time.process_time(), _status("RssAnon"), _status("RssFile"))
        self.stack.append([0.0, 0.0, 0.0])  # what the modules it imports cost
        try:
            self.inner.exec_module(module)
        finally:
            after = (time.process_time(), _status("RssAnon"), _status("RssFile"))
            nested = self.stack.pop()
            total = [after[i] - before[i] for i in range(3)]
            self.costs[module.__name__] = [total[i] - nested[i] for i in range(3)]
            if self.stack:
                self.stack[-1] = [self.stack[-1][i] + total[i] for i in range(3)]


class _Finder(importlib.abc.MetaPathFinder):
    """Finds modules as the other finders do, wrapping their loaders in :class:`_Measured`."""

    def __init__(self, costs: dict[str, list[float]]) -> None:
        self.costs = costs
        self.stack: list[list[float]] = []

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Measured(spec.loader, self.costs, self.stack)
                return spec
        return None


def _child_by_package() -> dict[str, float]:
    """Import what serve imports; each top-level package's own CPU ms and MiB (Kittiwake's
    packages by their second level, ``runtime.mcp``)."""
    costs: dict[str, list[float]] = {}
    sys.meta_path.insert(0, _Finder(costs))
    for name in _SERVE:
        importlib.import_module(name)
    figures: dict[str, float] = {}
    for name, (cpu, anon, file) in costs.items():
        parts = name.split(".")
        key = ".".join(parts[:2]) if _own(name) else parts[0]
        for label, value in (("cpu", cpu * 1000), ("anon", anon), ("file", file)):
            figures[f"{key}\t{label}"] = figures.get(f"{key}\t{label}", 0.0) + value
    return figures


def _report_packages(runs: list[dict[str, float]], top: int = 40) -> None:
    keys = {k.split("\t")[0] for run in runs for k in run}
    med = {
        (key, label): statistics.median(run.get(f"{key}\t{label}", 0.0) for run in runs)
        for key in keys for label in ("cpu", "anon", "file")
    }  # fmt: skip
    ranked = sorted(keys, key=lambda k: -med[(k, "cpu")])
    print(f"own cost of each package's modules when serve imports them ({len(runs)} runs, "
          "medians; ranked by CPU)")  # fmt: skip
    print(f"  {'package':<26} {'CPU ms':>8} {'anon MiB':>9} {'file MiB':>9}")
    for key in ranked[:top]:
        cpu, anon, file = (med[(key, label)] for label in ("cpu", "anon", "file"))
        print(f"  {key:<26} {cpu:8.1f} {anon:9.2f} {file:9.2f}")
    total = [sum(med[(k, label)] for k in keys) for label in ("cpu", "anon", "file")]
    print(f"  {'all ' + str(len(keys)) + ' packages':<26} {total[0]:8.1f} {total[1]:9.2f} "
          f"{total[2]:9.2f}")  # fmt: skip


def _child_duckdb(attach: bool) -> dict[str, float]:
    import duckdb

    Settings = dict[str, str | bool | int | float | list[str]]
    store_settings: Settings = {"memory_limit": "128MB", "threads": 1, "async_threads": 0}
    telemetry_settings: Settings = {"threads": 1, "async_threads": 0}
    with tempfile.TemporaryDirectory() as tmp:
        store = duckdb.connect(f"{tmp}/kittiwake.duckdb", config=store_settings)
        store.execute("create table t (a integer, b varchar)")
        store.execute("insert into t select range, 'x' from range(1000)")
        anon, threads, cpu = _status("RssAnon"), _status("Threads"), time.thread_time()
        if attach:
            conn = store.cursor()
            conn.execute("attach ? as telemetry", [f"{tmp}/telemetry.duckdb"])
            conn.execute("use telemetry")
        else:
            conn = duckdb.connect(f"{tmp}/telemetry.duckdb", config=telemetry_settings)
        conn.execute("create table spans (trace_id varchar, start_ns bigint)")
        conn.execute("create index spans_trace on spans (trace_id)")
        conn.execute("checkpoint")
        figures = {
            "CPU ms": (time.thread_time() - cpu) * 1000,
            "anonymous MiB": _status("RssAnon") - anon,
            "threads": _status("Threads") - threads,
        }
        conn.close()
        store.close()
    return figures


def _run_child(*argv: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv], cwd=ROOT, check=True,
        capture_output=True, text=True,
    )  # fmt: skip
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def _report(title: str, runs: list[dict[str, float]]) -> None:
    print(title)
    for name in runs[0]:
        values = [run[name] for run in runs]
        spread = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:<42} {statistics.median(values):8.1f}  ({spread})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--by-package", action="store_true", help="rank the packages' imports")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        gc.disable()
        kind = args.child[0]
        if kind == "modules":
            figures = _child_modules()
        elif kind == "by-package":
            figures = _child_by_package()
        elif kind == "imports":
            figures = _child_imports(Path(args.child[1]).read_text().split())
        else:
            figures = _child_duckdb(attach=kind == "attach")
        print(json.dumps(figures))
        return
    if args.by_package:
        _report_packages([_run_child("by-package") for _ in range(args.rounds)])
        return
    listed = _run_child("modules")
    others = [name[2:] for name in listed if name.startswith("m:")]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as names:
        names.write("\n".join(others))
    try:
        imports = [_run_child("imports", names.name) for _ in range(args.rounds)]
    finally:
        os.unlink(names.name)
    _report(f"imports before serving ({args.rounds} fresh interpreters, medians):", imports)
    second, attached = [], []
    for _ in range(args.rounds):  # interleaved
        second.append(_run_child("instance"))
        attached.append(_run_child("attach"))
    _report("telemetry file as a second DuckDB instance:", second)
    _report("telemetry file attached to the store's instance:", attached)


if __name__ == "__main__":
    main()
