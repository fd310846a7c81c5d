"""The sync thread: one sync covers what was queued before it, completions run in order,
and a failed sync fails every completion from then on."""

from __future__ import annotations

import threading

from storage._worker import Syncer


def test_completions_run_in_order_and_share_syncs() -> None:
    release, started = threading.Event(), threading.Event()
    calls: list[str] = []

    def sync() -> None:
        calls.append("sync")
        started.set()
        release.wait(5)

    done: list[tuple[int, BaseException | None]] = []
    finished = threading.Event()
    syncer = Syncer(sync)
    syncer.submit(lambda error: done.append((0, error)))
    assert started.wait(5)  # the first sync is running; the next three queue behind it
    for n in (1, 2, 3):
        syncer.submit(lambda error, n=n: done.append((n, error)))
    syncer.submit(lambda error: finished.set())
    release.set()
    assert finished.wait(5)
    syncer.stop()
    assert done == [(0, None), (1, None), (2, None), (3, None)]
    assert calls == ["sync", "sync"]  # one for the first, one for the three after it


def test_a_failed_sync_fails_every_completion_after_it() -> None:
    failure = OSError("injected: EIO")
    calls = 0

    def sync() -> None:
        nonlocal calls
        calls += 1
        raise failure

    seen: list[BaseException | None] = []
    first = threading.Event()
    syncer = Syncer(sync)
    syncer.submit(lambda error: (seen.append(error), first.set()))
    assert first.wait(5)
    syncer.submit(seen.append)  # after the failure: told at once, never synced again
    syncer.stop()
    assert seen == [failure, failure]
    assert calls == 1


def test_a_raising_completion_does_not_strand_the_next() -> None:
    seen: list[str] = []

    def boom(error: BaseException | None) -> None:
        raise RuntimeError("completion bug")

    syncer = Syncer(lambda: None)
    syncer.submit(boom)
    syncer.submit(lambda error: seen.append("after"))
    syncer.stop()
    assert seen == ["after"]
