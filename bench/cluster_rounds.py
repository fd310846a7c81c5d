"""Cluster mode against one DuckDB process, every server measured in turn, round by round.

Run: .venv/bin/python bench/cluster_rounds.py [--workers 1,2,4] [--sessions 20] [--rounds 5]
                                              [--sequential 50] [--bursts 5]
                                              [--tree NAME=PATH ...] [--name NAME]

``bench/cluster.py`` measures one server after the other, a minute apart: on a shared
machine whose load moves by the minute, two of its rows are not measured under the same
load. This starts every server first (``kittiwake serve`` on a DuckDB data dir, and ``serve
--store ... --workers N`` for each N, each on a database of its own in one temporary
PostgreSQL cluster, so no worker hears another server's notifications), then takes
``--rounds`` rounds; in each, every server in turn gets one series of ``--sequential``
prompts one after another in one session (``POST /prompt`` then ``POST /wait``), then
``--bursts`` times ``--sessions`` sessions prompted at once. The others are idle meanwhile. Each
figure is the median over the rounds, and each ratio to DuckDB is the median of the
per-round ratios, so a change of load between rounds moves both sides of a ratio.

``--tree NAME=PATH`` adds the same servers run from another checkout (``PYTHONPATH=PATH``),
in the same rotation: a before/after comparison under the same load. The client, the mock
provider (``bench/cluster.py --mock``) and PostgreSQL are this checkout's.

Per server and round: the series' median latency, its commits per prompt (PostgreSQL's
transaction id counter), and for the sessions at once prompts/s, the server's CPU per
prompt (every worker, plus every PostgreSQL process for the cluster rows) and commits per
prompt.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import msgspec
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import LeanClient, cpu_seconds, free_port  # noqa: E402 - after the path is set
from bench.cluster import (  # noqa: E402
    Server,
    _children,
    _commits,
    _prompt,
    _serving,
    _sessions,
)


class Target(msgspec.Struct):
    """One server in the rotation and its sessions."""

    label: str
    server: Server
    store: str | None
    sequential: str
    sessions: list[str]


class Round(msgspec.Struct):
    latency: float
    """The series' median, seconds."""
    commits: float
    """Commits per prompt of the series."""
    rate: float
    cpu_ms: float
    pg_cpu_ms: float
    at_once_commits: float


async def _start(
    stack: AsyncExitStack, label: str, root: Path, mock_url: str, store: str | None,
    workers: int, sessions: int,
) -> Target:  # fmt: skip
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    server = await stack.enter_async_context(_serving(tmp, mock_url, store, workers, root))
    (sequential,) = await _sessions(server.url, 1)
    target = Target(label, server, store, sequential, await _sessions(server.url, sessions))
    await _round(target, 5, 1, [])  # warm: the first prompts open the Location, leases, caches
    return target


async def _round(target: Target, n: int, bursts: int, pg_pids: list[int]) -> Round:
    """One series of *n* prompts, then *bursts* times every session at once, on *target*.
    Its connections are opened in this round, the bursts' once the series is done (a
    server closes a keep-alive connection idle for 5 s, as the bursts' would be while a
    series runs on a loaded machine)."""
    store, url = target.store, target.server.url
    client = await LeanClient.open(url)
    clients: list[LeanClient] = []
    try:
        commits0 = _commits(store) if store else 0
        samples = [await _prompt(client, target.sequential) for _ in range(n)]
        commits = (_commits(store) - commits0) / n if store else 0.0
        clients += [await LeanClient.open(url) for _ in target.sessions]
        pids = target.server.pids
        pg_pids = [p for p in pg_pids if p in _cpu(pg_pids)]  # backends still there
        cpu0, pg0 = sum(_cpu(pids).values()), sum(_cpu(pg_pids).values()) if store else 0.0
        commits0 = _commits(store) if store else 0
        start = time.perf_counter()
        for _ in range(bursts):
            async with trio.open_nursery() as nursery:
                for each, sid in zip(clients, target.sessions, strict=True):
                    nursery.start_soon(_prompt, each, sid)
        took = time.perf_counter() - start
        prompts = len(target.sessions) * bursts
        cpu = (sum(_cpu(pids).values()) - cpu0) / prompts
        pg_cpu = (sum(_cpu(pg_pids).values()) - pg0) / prompts if store else 0.0
        at_once_commits = (_commits(store) - commits0) / prompts if store else 0.0
    finally:
        for each in [client, *clients]:
            await each.aclose()
    return Round(
        statistics.median(samples), commits, prompts / took, (cpu + pg_cpu) * 1000,
        pg_cpu * 1000, at_once_commits,
    )  # fmt: skip


def _cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds of each of *pids* still running (PostgreSQL's backends come and go)."""
    found: dict[int, float] = {}
    for pid in pids:
        try:
            found[pid] = cpu_seconds(pid)
        except FileNotFoundError:
            continue
    return found


async def _measure(args: argparse.Namespace) -> None:
    from tests.postgres import PostgresCluster

    mock_port = free_port()
    mock = await trio.lowlevel.open_process(
        [sys.executable, str(ROOT / "bench" / "cluster.py"), "--mock", str(mock_port)],
        stdout=subprocess.DEVNULL,
    )
    cluster = await trio.to_thread.run_sync(PostgresCluster.start)
    mock_url = f"http://127.0.0.1:{mock_port}"
    trees = [(args.name if args.tree else "", ROOT), *args.tree]
    rounds: dict[str, list[Round]] = {}
    try:
        async with AsyncExitStack() as stack:
            targets: list[Target] = []
            for name, root in trees:
                for workers in [None, *args.workers]:
                    kind = (
                        "DuckDB, 1 process" if workers is None else f"PostgreSQL, {workers} workers"
                    )
                    label = f"{name}: {kind}" if name else kind
                    store = None if workers is None else cluster.create_database()
                    targets.append(
                        await _start(
                            stack, label, root, mock_url, store, workers or 1, args.sessions
                        )
                    )
                    print(f"started {label}", flush=True)
            postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
            for r in range(args.rounds):
                load = (await trio.Path("/proc/loadavg").read_text()).split()[0]
                print(f"round {r + 1} (load average {load})", flush=True)
                pg_pids = [postmaster, *_children(postmaster)]
                for target in targets:
                    rounds.setdefault(target.label, []).append(
                        await _round(target, args.sequential, args.bursts, pg_pids)
                    )
    finally:
        mock.terminate()
        await mock.wait()
        await trio.to_thread.run_sync(cluster.stop)
    _report(rounds, args.sessions)


def _report(rounds: dict[str, list[Round]], sessions: int) -> None:
    print()
    print(
        "| server | 1 prompt: median; commits/prompt | × DuckDB | "
        f"{sessions} at once: prompts/s; CPU ms/prompt (of it PG); commits/prompt | × DuckDB |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, each in rounds.items():
        name = label.split(": ", 1)[0] if ": " in label else ""
        duck = rounds[f"{name}: DuckDB, 1 process" if name else "DuckDB, 1 process"]
        latency = statistics.median(r.latency for r in each) * 1000
        ratio = statistics.median(r.latency / d.latency for r, d in zip(each, duck, strict=True))
        rate = statistics.median(r.rate / d.rate for r, d in zip(each, duck, strict=True))
        med = {f: statistics.median(getattr(r, f) for r in each) for f in Round.__struct_fields__}
        print(
            f"| {label} | {latency:.1f} ms; {med['commits']:.2f} | {ratio:.2f} | "
            f"{med['rate']:.0f}/s; {med['cpu_ms']:.2f} ({med['pg_cpu_ms']:.2f}); "
            f"{med['at_once_commits']:.2f} | {rate:.2f} |"
        )


def _tree(text: str) -> tuple[str, Path]:
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"--tree takes NAME=PATH, not {text!r}")
    return name, Path(path).resolve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,4", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sequential", type=int, default=50)
    parser.add_argument(
        "--bursts", type=int, default=5, help="times every session is prompted at once per round"
    )
    parser.add_argument("--tree", type=_tree, action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--name", default="this", help="this checkout's name beside --tree")
    args = parser.parse_args()
    try:
        trio.run(_measure, args)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
