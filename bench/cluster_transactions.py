"""PostgreSQL transactions and statements per prompt in cluster mode, counted, not timed.

Run: .venv/bin/python bench/cluster_transactions.py [--workers 1,2] [--prompts 100]
                                                    [--tree NAME=PATH ...] [--name NAME]

A shared, loaded machine moves every latency; counts do not move with load. For each tree
(this checkout, and each ``--tree`` run with ``PYTHONPATH=PATH``) and each worker count,
``serve --store ... --workers N`` runs on a database of its own in one temporary
PostgreSQL cluster; one session gets ``--prompts`` prompts one after another (``POST
/prompt`` then ``POST /wait``, as ``bench/cluster.py``). PostgreSQL's own counters for
that database (``pg_stat_database``: transactions committed and rolled back, read-only
ones included) are read before and after, each time once the server has been idle for
longer than PostgreSQL's statistics flush (11 s), and the same counters over an equally
long idle window (the sweep's and the bench's own reads) are subtracted. Also reported:
writing transactions per prompt (``txid_current``, as ``bench/cluster.py``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import LeanClient, free_port  # noqa: E402 - after the path is set
from bench.cluster import _commits, _prompt, _serving, _sessions  # noqa: E402

_FLUSH = 11.0
"""Seconds idle after which every backend has flushed its statistics (PostgreSQL flushes
an idle backend's at least every 10 s)."""


def _transactions(url: str) -> int:
    """Committed plus rolled-back transactions of *url*'s database (PostgreSQL's counters)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "select xact_commit + xact_rollback from pg_stat_database "
            "where datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


async def _count(root: Path, mock_url: str, store: str, workers: int, prompts: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        async with _serving(Path(tmp), mock_url, store, workers, root) as server:
            (sid,) = await _sessions(server.url, 1)
            client = await LeanClient.open(server.url)
            try:
                for _ in range(5):  # warm: the lease taken, the caches filled
                    await _prompt(client, sid)
                await client.aclose()
                await trio.sleep(_FLUSH)
                idle0 = _transactions(store)
                start = time.perf_counter()
                await trio.sleep(_FLUSH)
                idle = _transactions(store) - idle0 - 1  # the read before it
                client = await LeanClient.open(server.url)
                before, writes0 = _transactions(store), _commits(store)
                for _ in range(prompts):
                    await _prompt(client, sid)
                took = time.perf_counter() - start - _FLUSH
                writes = _commits(store) - writes0 - 1
                await client.aclose()
                await trio.sleep(_FLUSH)
                counted = _transactions(store) - before - 3  # the reads of the counters
            finally:
                await client.aclose()
    background = idle * (took + _FLUSH) / _FLUSH
    return (
        f"{(counted - background) / prompts:.2f} ({counted / prompts:.2f} raw; idle window "
        f"{idle}) | {writes / prompts:.2f}"
    )


async def _measure(args: argparse.Namespace) -> None:
    from tests.postgres import PostgresCluster

    mock_port = free_port()
    mock = await trio.lowlevel.open_process(
        [sys.executable, str(ROOT / "bench" / "cluster.py"), "--mock", str(mock_port)],
        stdout=subprocess.DEVNULL,
    )
    cluster = await trio.to_thread.run_sync(PostgresCluster.start)
    rows: list[str] = []
    try:
        for name, root in [(args.name, ROOT), *args.tree]:
            for workers in args.workers:
                store = cluster.create_database()
                figures = await _count(
                    root, f"http://127.0.0.1:{mock_port}", store, workers, args.prompts
                )
                rows.append(f"| {name}: {workers} workers | {figures} |")
                print(rows[-1], flush=True)
    finally:
        mock.terminate()
        await mock.wait()
        await trio.to_thread.run_sync(cluster.stop)
    print()
    print("| server | transactions per prompt | writing transactions per prompt |")
    print("|---|---:|---:|")
    print("\n".join(rows))


def _tree(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--tree takes NAME=PATH, not {text!r}")
    return name, Path(path).resolve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--tree", type=_tree, action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--name", default="this", help="this checkout's name beside --tree")
    trio.run(_measure, parser.parse_args())


if __name__ == "__main__":
    main()
