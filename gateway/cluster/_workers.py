"""``kittiwake serve --store postgresql://... --workers N``: one socket, N worker processes.

The parent binds and listens on the socket once and starts N ``kittiwake serve``
processes (``python -m gateway serve``) that serve it: each is handed the listening
descriptor and gives it to Hypercorn as its documented ``fd://`` bind, so the kernel's one
accept queue feeds every worker and a worker that dies loses no queued connection. The
parent opens no runtime: it restarts a worker that dies (logged, with a growing delay when
one dies soon after starting) and, on SIGTERM or SIGINT, sends SIGTERM to every worker and
waits for them (SIGKILL after ``WorkerLimits.stop_grace``).

A worker is told three descriptors: the socket, a *ready* pipe on which it writes its
owner id once it serves (then closes it), and a *lifeline* pipe whose write end only the
parent holds: when the parent is gone, however it ended, the worker reads end of file and
stops as on SIGTERM. Workers run in their own process group, so a terminal's Ctrl-C reaches
the parent alone, which stops them in order.

Every ``serve --store`` process is a worker with an owner id (``--owner``, else
:func:`new_owner`): the name its session leases are held under. More machines run the same
command against the same database behind any HTTP load balancer.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Final

import msgspec
import trio

from actors import ClusterOptions
from gateway._datadir import CliError, forget_serving, record_serving
from runtime import StorageError

__all__ = [
    "WorkerLimits",
    "announce_ready",
    "check_store_url",
    "cluster_options",
    "new_owner",
    "reach_store",
    "serve_with_workers",
    "serve_workers",
    "wait_for_stop",
    "worker_telemetry_dir",
]

_log = logging.getLogger("kittiwake.workers")
_BACKLOG: Final = 1024
"""Connections the shared socket queues while every worker is busy (Hypercorn's listen)."""


class WorkerLimits(msgspec.Struct, frozen=True):
    """The parent's bounds. Every field is in seconds."""

    start_timeout: float = 60.0
    """How long a worker has to start serving (write its owner id) before it is killed
    (and restarted, as a worker that dies)."""
    stop_grace: float = 30.0
    """How long stopping workers have to finish (drains settle) before SIGKILL."""
    restart_delay: float = 0.5
    """Wait before restarting a worker that died; doubled while workers keep dying young."""
    max_restart_delay: float = 30.0
    """The longest wait between restarts of one worker."""
    healthy_after: float = 10.0
    """A worker that served this long before dying is restarted after ``restart_delay``."""


def new_owner(slot: int | None = None) -> str:
    """A new owner id, unique across machines and restarts: ``<host>-<pid|wN>-<hex>``."""
    where = f"w{slot}" if slot is not None else str(os.getpid())
    return f"{socket.gethostname()}-{where}-{secrets.token_hex(4)}"


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """The runtime's cluster options of a ``serve --store`` worker: its owner id (the
    parent's, else a new one) and lease timings from ``--lease-ttl`` (renewed every quarter
    of it, orphaned sessions looked for every half) and ``--lease-idle`` (how long an idle
    session's lease stays parked).

    Raises:
        CliError: a ``--lease-ttl`` that is not a positive number of seconds, or a
            ``--lease-idle`` that is negative (status 2).
    """
    ttl, idle = args.lease_ttl, args.lease_idle
    if not ttl > 0:
        raise CliError(f"--lease-ttl must be a positive number of seconds, not {ttl}", 2)
    if not idle >= 0:
        raise CliError(f"--lease-idle must be 0 or more seconds, not {idle}", 2)
    owner = args.owner or new_owner()
    return ClusterOptions(
        owner=owner, lease_ttl=ttl, renew_every=ttl / 4, sweep_every=ttl / 2, lease_idle=idle
    )


def worker_telemetry_dir(data_dir: Path, slot: int | None) -> Path:
    """Where a worker keeps ``telemetry.duckdb``: one DuckDB file per process, so the
    worker in *slot* of ``--workers`` uses ``<data dir>/workers/<slot>`` (a restarted
    worker takes its slot's file over); a lone ``serve`` uses the data dir."""
    return data_dir if slot is None else data_dir / "workers" / str(slot)


def check_store_url(url: str | None) -> None:
    """Raise ``CliError`` unless *url* is None or a PostgreSQL URL."""
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise CliError(f"--store takes a PostgreSQL URL (postgresql://...), not {url!r}")


async def reach_store(url: str | None, data_dir: Path, owner: str) -> None:
    """Open and close the PostgreSQL store at *url* once as cluster worker *owner*
    (creating its schema), so that an unreachable server, or a database a single-process
    store holds, is one line, not the storage actor's restarts.

    Raises:
        CliError: the server cannot be reached or refused the schema.
    """
    if url is None:
        return
    from storage import PostgresStore  # psycopg loads only for a PostgreSQL store

    try:
        store = await trio.to_thread.run_sync(
            lambda: PostgresStore.open(url, directory=data_dir, connect_timeout=5, owner=owner)
        )
    except StorageError as exc:
        raise CliError(" ".join(str(exc).split())) from None
    store.close()


async def serve_with_workers(
    args: argparse.Namespace, data_dir: Path,
    forward: Callable[[argparse.Namespace], list[str]],
) -> int:  # fmt: skip
    """``kittiwake serve --workers N``: check once what a person can get wrong (no
    ``--store``, an unreachable one, a bad ``--lease-ttl``), then :func:`serve_workers`,
    each worker this command with the options *forward* (the command line's
    ``worker_options``) derives from *args*: every option but ``--workers``, with the data
    dir, directory and address as this process resolved them; ``serving.json`` names the
    parent while it runs.

    Raises:
        CliError: no ``--store`` or a bad ``--lease-ttl`` (exit status 2), or see
            :func:`serve_workers`.
    """
    if args.store is None:
        raise CliError(
            "--workers needs --store postgresql://...: the DuckDB store in a data dir is "
            "served by one process", 2,
        )  # fmt: skip
    cluster_options(args)  # a bad --lease-ttl is one line here, not every worker failing
    await reach_store(args.store, data_dir, new_owner())  # the schema is made once, here
    resolved = argparse.Namespace(**{**vars(args), "data_dir": str(data_dir)})
    argv = [sys.executable, "-m", "gateway", "serve", *forward(resolved)]
    try:
        return await serve_workers(
            count=args.workers, host=args.hostname, port=args.port, argv=argv,
            url_scheme="https" if args.certfile else "http",
            on_serving=partial(record_serving, data_dir),
        )  # fmt: skip
    finally:
        forget_serving(data_dir)


class _Worker:
    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.owner = ""
        self.process: trio.Process | None = None
        self.started = trio.Event()
        """Set once a process of this slot serves, or one exited with an error before any
        of the slot's did."""
        self.failed: int | None = None
        """The exit status of a process that exited with an error before any of the
        slot's served."""


async def serve_workers(
    *, count: int, host: str, port: int, argv: Sequence[str], url_scheme: str = "http",
    limits: WorkerLimits | None = None, on_serving: Callable[[str], None] | None = None,
) -> int:  # fmt: skip
    """Bind *host*:*port*, start *count* workers (``argv`` plus the worker options) serving
    it, print the serving line, keep them running until SIGTERM or SIGINT; return 0.

    *on_serving* (a callable taking the URL) is called once every worker serves.

    Raises:
        CliError: the address cannot be bound, or a worker exited with an error status
            before its slot first served (its own error line is on standard error before
            this one); every worker started is stopped first. A worker killed by a signal
            before serving is restarted instead.
    """
    from gateway.http import bind

    limits = limits or WorkerLimits()
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    lifeline_read, lifeline_write = os.pipe()
    try:
        sock.listen(_BACKLOG)
        bound = sock.getsockname()[1]
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        url = f"{url_scheme}://{shown}:{bound}"
        workers = [_Worker(slot) for slot in range(count)]
        stopping = trio.Event()
        async with trio.open_nursery() as nursery:
            for worker in workers:
                nursery.start_soon(
                    _keep, worker, [*argv, "--port", str(bound)], sock.fileno(), lifeline_read,
                    limits, stopping,
                )  # fmt: skip
            for worker in workers:
                await worker.started.wait()
                if worker.failed is not None:
                    stopping.set()
                    await _stop_all(workers, limits)
                    raise CliError(
                        f"worker {worker.slot} exited with status {worker.failed} before "
                        "serving; nothing is served"
                    )
            print(f"kittiwake: serving {url} with {count} workers", flush=True)
            if on_serving is not None:
                on_serving(url)
            reason = await wait_for_stop(None)
            print(f"kittiwake: stopping {count} workers ({reason})", file=sys.stderr, flush=True)
            stopping.set()
            await _stop_all(workers, limits)
    finally:
        os.close(lifeline_write)
        os.close(lifeline_read)
        sock.close()
    return 0


async def _keep(
    worker: _Worker, argv: list[str], fd: int, lifeline: int, limits: WorkerLimits,
    stopping: trio.Event,
) -> None:  # fmt: skip
    """Run the worker of *worker*'s slot, again after each death, until *stopping*; but
    a process that exits with an error status before the slot first served ends the slot
    (``worker.failed``): the command cannot start. One killed by a signal meanwhile (the
    OOM killer, a stray SIGKILL, ``start_timeout``) is restarted as one that dies later."""
    delay = limits.restart_delay
    while not stopping.is_set():
        worker.owner = new_owner(worker.slot)
        began = trio.current_time()
        status = await _run_one(worker, argv, fd, lifeline, limits)
        if stopping.is_set():
            return
        if status > 0 and not worker.started.is_set():  # an error (not a signal) at start
            worker.failed = status
            worker.started.set()
            return
        lived = trio.current_time() - began
        delay = limits.restart_delay if lived >= limits.healthy_after else delay
        print(
            f"kittiwake: worker {worker.slot} (owner {worker.owner}) exited with status "
            f"{status} after {lived:.1f} s; restarting in {delay:.1f} s",
            file=sys.stderr, flush=True,
        )  # fmt: skip
        with trio.move_on_after(delay):
            await stopping.wait()
        delay = min(delay * 2, limits.max_restart_delay)


async def _run_one(
    worker: _Worker, argv: list[str], fd: int, lifeline: int, limits: WorkerLimits
) -> int:
    """Start one worker process, wait for its owner id on the ready pipe (it is killed if
    that takes over ``start_timeout``), then for its end; its exit status."""
    ready_read, ready_write = os.pipe()
    try:
        command = [
            *argv, "--owner", worker.owner, "--worker-slot", str(worker.slot),
            "--listen-fd", str(fd), "--ready-fd", str(ready_write), "--lifeline-fd", str(lifeline),
        ]  # fmt: skip
        process = await trio.lowlevel.open_process(
            command, pass_fds=(fd, ready_write, lifeline), stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    except BaseException:
        os.close(ready_read)
        raise
    finally:
        os.close(ready_write)
    worker.process = process
    try:
        async with trio.lowlevel.FdStream(ready_read) as ready:
            said = b""
            with trio.move_on_after(limits.start_timeout) as waited:
                while not said.endswith(b"\n"):
                    chunk = await ready.receive_some(256)
                    if not chunk:
                        break
                    said += chunk
            if waited.cancelled_caught:
                _log.error(
                    "worker %d did not serve within %.0f s", worker.slot, limits.start_timeout
                )
                process.kill()
            elif said.endswith(b"\n"):
                _log.info(
                    "worker %d serving as %s (pid %d)", worker.slot, worker.owner, process.pid
                )
                worker.started.set()
        return await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _stop_all(workers: list[_Worker], limits: WorkerLimits) -> None:
    """SIGTERM every running worker, then wait; SIGKILL those still running after the
    grace. Shielded: a stop that was begun finishes."""
    with trio.CancelScope(shield=True):
        running = [w.process for w in workers if w.process and w.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(limits.stop_grace):
            for process in running:
                await process.wait()
        for process in running:
            if process.returncode is None:
                _log.error("worker pid %d did not stop in time; killed", process.pid)
                process.kill()
                await process.wait()


def announce_ready(fd: int, owner: str) -> None:
    """Tell the parent this worker serves: write *owner* and a newline on *fd*, close it."""
    try:
        os.write(fd, owner.encode() + b"\n")
    finally:
        os.close(fd)


async def wait_for_stop(lifeline: int | None) -> str:
    """Wait for SIGTERM or SIGINT, or (with *lifeline*, a worker's) for the parent to be
    gone; return which, as words for the log line. Cancellation ends the wait."""
    reason = ""
    async with trio.open_nursery() as nursery:

        async def signals() -> None:
            nonlocal reason
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
                async for signum in received:
                    reason = f"signal {signum}"
                    nursery.cancel_scope.cancel()

        async def parent_gone(fd: int) -> None:
            nonlocal reason
            async with trio.lowlevel.FdStream(os.dup(fd)) as stream:
                while await stream.receive_some(64):
                    pass
            reason = "the end of the parent process"
            nursery.cancel_scope.cancel()

        nursery.start_soon(signals)
        if lifeline is not None:
            nursery.start_soon(parent_gone, lifeline)
    return reason
