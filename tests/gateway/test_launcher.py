"""The ``kittiwake`` launcher pauses the cyclic collector for start-up, then freezes and resumes."""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
import textwrap
from pathlib import Path

import trio

from gateway._collector import SERVED_YOUNG_THRESHOLD
from gateway.cli._main import _end_startup

ROOT = Path(__file__).resolve().parents[2]

_WATCHED_SERVE = textwrap.dedent(
    """
    import gc, os, signal, sys, threading, time, urllib.request
    from gateway.__main__ import main

    port = sys.argv[1]

    def watch():
        deadline = time.monotonic() + 20
        while gc.isenabled() and time.monotonic() < deadline:  # until main() pauses it
            time.sleep(0.001)
        seen = [gc.isenabled()]
        while time.monotonic() < deadline:
            # read the collector's state before the attempt: a refused attempt proves the
            # server was not yet listening at that moment (read after, it may have started
            # and resumed the collector in between)
            before = gc.isenabled()
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=15)
                break
            except OSError:
                seen.append(before)
                time.sleep(0.01)
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        print("paused", not any(seen), "enabled", gc.isenabled(),
              "frozen", gc.get_freeze_count(), "young", gc.get_threshold()[0], flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    sys.argv = ["kittiwake", "serve", "--port", port]
    sys.exit(main())
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_serve_resumes_a_frozen_collector_once_accepting(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "KITTIWAKE_DATA_DIR": str(tmp_path)}
    env.pop("KITTIWAKE_SERVER_PASSWORD", None)
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", _WATCHED_SERVE, str(_free_port())],
            capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT, env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    words = done.stdout.decode().splitlines()[-1].split()
    report = dict(zip(words[::2], words[1::2], strict=True))
    # Paused while starting, running again once serving, with start-up's objects frozen
    # and the young generation collected less often than Python's default.
    assert report["paused"] == "True"
    assert report["enabled"] == "True"
    assert int(report["frozen"]) > 50_000
    assert int(report["young"]) == SERVED_YOUNG_THRESHOLD


def test_end_startup_freezes_and_resumes_only_when_paused():
    assert gc.isenabled()
    thresholds = gc.get_threshold()
    left_alone = argparse.Namespace(collector_paused=False, command="serve")
    _end_startup(left_alone)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert gc.get_threshold() == thresholds

    paused = argparse.Namespace(collector_paused=True, command="sessions")
    gc.disable()
    try:
        _end_startup(paused)
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert paused.collector_paused is False
        assert gc.get_threshold() == thresholds  # a client command keeps Python's
        gc.disable()
        _end_startup(paused)  # once only: a second call leaves the collector alone
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_served_process_collects_its_young_generation_less_often():
    thresholds = gc.get_threshold()
    serving = argparse.Namespace(collector_paused=True, command="serve")
    gc.disable()
    try:
        _end_startup(serving)
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert gc.get_threshold() == (SERVED_YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
        gc.unfreeze()
