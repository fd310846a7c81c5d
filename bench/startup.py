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

``bench/gateway.py --runs 0 --cold N`` measures the whole start (first 200, idle RSS).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
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
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        gc.disable()
        kind = args.child[0]
        if kind == "modules":
            figures = _child_modules()
        elif kind == "imports":
            figures = _child_imports(Path(args.child[1]).read_text().split())
        else:
            figures = _child_duckdb(attach=kind == "attach")
        print(json.dumps(figures))
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
