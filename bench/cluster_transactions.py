"""PostgreSQL transactions and statements per prompt in cluster mode, counted, not timed.

Run: .venv/bin/python bench/cluster_transactions.py [--workers 1,2] [--prompts 100]
                                                    [--tree NAME=PATH ...] [--name NAME]
                                                    [--statements] [--streamed]
                                                    [--warmed-on any|same|other]

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

``--statements`` also has PostgreSQL log every statement of the server's database
(``log_statement = 'all'``, which slows the server a little) and counts, per prompt, the
reads of the measured prompts by kind (``_READS``): which reads a prompt still makes, in
all and on each connection that made any (its backend pid; busiest first).

The mock's answer is instant by default, so a turn often ends before the ``wait`` that
follows its prompt arrives (the ``wait`` then looks at the lease and the inbox once);
``--streamed`` asks the mock's streamed model instead (``bench/cluster.py``: 10 chunks
over 180 ms), so the ``wait`` arrives while the turn runs, as with a real provider.

With more than one worker, which worker took the warm-up prompts matters: when it is not
the one that takes the measured prompts, the session's actor stays active there though
another worker drives. ``--warmed-on same`` sends the measured prompts to the worker that
took the warm-up (and the session's creation), ``other`` to another one (each new
connection's worker told by ``GET /api/actors``); ``any`` (the default) leaves each
connection to the kernel's choice of worker.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec
import psycopg
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._lean import LeanClient, free_port  # noqa: E402 - after the path is set
from bench.cluster import FAST, STREAMED, _commits, _prompt, _serving, _sessions  # noqa: E402

_PLACING: Final = 64
"""New connections tried at most to reach a chosen worker (``--warmed-on``)."""
_FLUSH = 11.0
"""Seconds idle after which every backend has flushed its statistics (PostgreSQL flushes
an idle backend's at least every 10 s)."""


_READS: Final = (
    (
        "version checks",
        re.compile(r"select id, version from session where id = any\(\$1\) order by id$"),
    ),
    (
        "lease reads",
        re.compile(r"select session_id, owner, token, .* from session_lease .*(?<!for update)$"),
    ),
    ("session rows", re.compile(r"select data, \(select coalesce\(max\(seq\)")),
    ("event reads", re.compile(r"select id, aggregate_id, seq, type, version, data from event")),
)
"""The reads ``--statements`` counts, by the text of their SQL (``storage._pg_caches``,
``storage._leases``, ``storage._caches``); batches' locking reads end ``for update``."""
_LOGGED: Final = re.compile(r"\[(\d+)\] \S* ?LOG:  (?:statement|execute [^:]*): (.*)$")


def _log_statements(url: str) -> None:
    """Have PostgreSQL log every statement of *url*'s database, each line with its backend
    pid (connections opened from now on)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"alter database \"{conn.info.dbname}\" set log_statement = 'all'")
        conn.execute("alter system set log_line_prefix = '%m [%p] %d '")
        conn.execute("select pg_reload_conf()")


def _reads(log: str, prompts: int) -> str:
    """The reads of *log* (the server log's lines of the measured prompts), per prompt by
    kind: the total, then each connection's (backend pid) that made any, busiest first."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    by_pid: collections.Counter[str] = collections.Counter()
    for line in log.splitlines():
        found = _LOGGED.search(line)
        if found is None:
            continue
        pid, sql = found.groups()
        for kind, pattern in _READS:
            if pattern.search(sql.strip()):
                counts[kind, pid] += 1
                by_pid[pid] += 1
                break
    pids = [pid for pid, _ in by_pid.most_common()]
    figures = []
    for kind, _ in _READS:
        each = [counts[kind, pid] / prompts for pid in pids]
        split = " = " + " + ".join(f"{n:.2f}" for n in each) if len(each) > 1 else ""
        figures.append(f"{kind} {sum(each):.2f}{split}")
    return "; ".join(figures)


def _logged(log: Path | None) -> int:
    """The server log's size now (0 without one)."""
    return log.stat().st_size if log is not None else 0


def _log_since(log: Path, offset: int) -> str:
    """The server log's text after *offset* bytes."""
    with log.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def _transactions(url: str) -> int:
    """Committed plus rolled-back transactions of *url*'s database (PostgreSQL's counters)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "select xact_commit + xact_rollback from pg_stat_database "
            "where datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


async def _client_on(url: str, wanted: Callable[[int], bool]) -> tuple[LeanClient, int]:
    """A connection to a worker whose pid is *wanted* (``/api/actors`` says), and that
    pid; new connections are tried at most ``_PLACING`` times."""
    for _ in range(_PLACING):
        client = await LeanClient.open(url)
        pid = int(msgspec.json.decode(await client.get("/api/actors"))["pid"])
        if wanted(pid):
            return client, pid
        await client.aclose()
    raise RuntimeError(f"no connection of {_PLACING} reached the wanted worker")


async def _count(
    root: Path, mock_url: str, store: str, workers: int, prompts: int, log: Path | None,
    model: str = FAST, warmed_on: str = "any",
) -> str:  # fmt: skip
    if log is not None:
        _log_statements(store)
    reads = ""
    with tempfile.TemporaryDirectory() as tmp:
        async with _serving(Path(tmp), mock_url, store, workers, root) as server:
            if warmed_on == "any":
                (sid,) = await _sessions(server.url, 1, model)
                client, warmer = await LeanClient.open(server.url), None
            else:  # created and warmed on one worker, the measured prompts on it or another
                client, warmer = await _client_on(server.url, lambda pid: True)
                body = msgspec.json.encode({"model": {"id": model, "providerID": "mock"}})
                sid = msgspec.json.decode(await client.post("/api/session", body))["data"]["id"]
            try:
                for _ in range(5):  # warm: the lease taken, the caches filled
                    await _prompt(client, sid)
                await client.aclose()
                await trio.sleep(_FLUSH)
                idle0 = _transactions(store)
                start = time.perf_counter()
                await trio.sleep(_FLUSH)
                idle = _transactions(store) - idle0 - 1  # the read before it
                if warmer is None:
                    client = await LeanClient.open(server.url)
                else:
                    same = warmed_on == "same"
                    client, _ = await _client_on(server.url, lambda pid: (pid == warmer) == same)
                before, writes0 = _transactions(store), _commits(store)
                logged = _logged(log)
                for _ in range(prompts):
                    await _prompt(client, sid)
                took = time.perf_counter() - start - _FLUSH
                writes = _commits(store) - writes0 - 1
                if log is not None:
                    await trio.sleep(0.5)  # the last prompt's relayed reads, elsewhere
                    reads = _reads(_log_since(log, logged), prompts)
                await client.aclose()
                await trio.sleep(_FLUSH)
                counted = _transactions(store) - before - 3  # the reads of the counters
            finally:
                await client.aclose()
    background = idle * (took + _FLUSH) / _FLUSH
    return (
        f"{(counted - background) / prompts:.2f} ({counted / prompts:.2f} raw; idle window "
        f"{idle}) | {writes / prompts:.2f}" + (f" | {reads}" if log is not None else "")
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
                log = cluster.directory / "server.log" if args.statements else None
                figures = await _count(
                    root, f"http://127.0.0.1:{mock_port}", store, workers, args.prompts, log,
                    STREAMED if args.streamed else FAST,
                    "any" if workers == 1 else args.warmed_on,
                )  # fmt: skip
                rows.append(f"| {name}: {workers} workers | {figures} |")
                print(rows[-1], flush=True)
    finally:
        mock.terminate()
        await mock.wait()
        await trio.to_thread.run_sync(cluster.stop)
    print()
    if args.statements:
        print(
            "| server | transactions per prompt | writing transactions per prompt | reads per "
            "prompt by kind (= each connection's, busiest first) |"
        )
        print("|---|---:|---:|---|")
    else:
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
    parser.add_argument(
        "--statements", action="store_true", help="also count the reads by kind (server log)"
    )
    parser.add_argument(
        "--streamed",
        action="store_true",
        help="answers that take 180 ms (the mock's streamed model)",
    )
    parser.add_argument(
        "--warmed-on",
        choices=("any", "same", "other"),
        default="any",
        help="with 2 workers or more: the measured prompts sent to the worker that took the "
        "warm-up prompts, to another one, or wherever their connection lands (any)",
    )
    trio.run(_measure, parser.parse_args())


if __name__ == "__main__":
    main()
