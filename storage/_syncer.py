"""The syncer: a thread that fdatasyncs the journal while the store's thread goes on.

The store's thread writes batch after batch into the journal and hands each one's
completion here; one fdatasync then covers every batch written before it began, and
their completions run in LSN order on this thread (answering callers, handing rows to
the applier). Planning and writing the next batch overlap the previous one's sync.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["Syncer"]

Completion = Callable[[BaseException | None], None]
_log = logging.getLogger("kittiwake.storage")


class Syncer:
    """Runs *sync* for queued completions and calls each with the outcome.

    Args:
        sync: makes everything written so far durable; raises on failure.

    After a failed sync every queued and later completion gets that error.
    """

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._queue: deque[Completion] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._error: BaseException | None = None
        self.syncs = 0
        self._thread = threading.Thread(target=self._run, name="kittiwake-sync", daemon=True)
        self._thread.start()

    def submit(self, completion: Completion) -> None:
        """Queue the completion of a batch already written; never blocks on the disk."""
        with self._cond:
            self._queue.append(completion)
            if len(self._queue) == 1:
                self._cond.notify()

    def stop(self) -> None:
        """Sync and complete what is queued, then end the thread (waits for it)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                work = list(self._queue)
                self._queue.clear()
            if self._error is None:
                try:
                    self._sync()
                    self.syncs += 1
                except BaseException as exc:  # noqa: BLE001 - every completion is told
                    self._error = exc
            for completion in work:
                try:
                    completion(self._error)
                except Exception:  # a failing completion must not strand the ones after it
                    _log.exception("a sync completion failed")
