"""The StorageActor: trio's side of the one DuckDB connection.

Callers send operations into a bounded mailbox. The actor takes everything
queued (up to ``max_batch``), hands the batch to the store, and answers each
caller only after the batch committed: group commit falls out of the queue
filling while the previous batch is being written.

Threaded mode (the default) runs the store in a pykka ``ThreadingActor`` that
owns the connection; results come back through ``TrioToken.run_sync_soon``, so
the trio thread never blocks on ``.get()``. Inline mode runs the same store on
the trio thread, for deterministic simulation under a mock clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import msgspec
import pykka
import trio

from actors._actor import Actor, call
from actors._errors import ActorCrashed, ActorStopped
from actors._events import EventHub
from actors._mailbox import Reply, open_mailbox
from runtime import StorageError
from storage import EventStore, Outcome, StoredEvent, WriteBatch

__all__ = ["StorageActor", "StorageMode"]

T = TypeVar("T")
StorageMode = Literal["threaded", "inline"]
DEFAULT_MAILBOX: Final = 8192
DEFAULT_MAX_BATCH: Final = 1024


class _Write(msgspec.Struct, frozen=True):
    op: Callable[[WriteBatch], Any]
    reply: Reply[Any]
    durable: bool = True


class _Read(msgspec.Struct, frozen=True):
    op: Callable[[EventStore], Any]
    reply: Reply[Any]


_Request = _Write | _Read


class _DuckThread(pykka.ThreadingActor):
    """The pykka thread that owns the store. Every message is (job, callback)."""

    def __init__(self, directory: Path, options: dict[str, Any]) -> None:
        super().__init__()
        self._directory = directory
        self._options = options
        self.store: EventStore | None = None

    def on_receive(self, message: Any) -> None:
        job, post = message
        try:
            if self.store is None:
                self.store = EventStore.open(self._directory, **self._options)
            result: Any = job(self.store)
        except Exception as exc:  # noqa: BLE001 - posted back to trio, which decides
            post(None, exc)
        else:
            post(result, None)

    def on_stop(self) -> None:
        if self.store is not None:
            self.store.close()


class StorageActor(Actor[_Request]):
    """Group-committing front of the event store; see the module docstring.

    Args:
        directory: the data dir.
        hub: where committed events are published after each batch.
        mode: ``"threaded"`` (pykka thread) or ``"inline"`` (trio thread).
        max_batch: most operations in one commit.
        mailbox_bound: most queued operations before senders wait.
        store_options: passed to :meth:`EventStore.open` (``fsync``, ``backup_every``).
    """

    kind = "storage"

    def __init__(
        self,
        directory: Path,
        *,
        hub: EventHub,
        mode: StorageMode = "threaded",
        max_batch: int = DEFAULT_MAX_BATCH,
        mailbox_bound: int = DEFAULT_MAILBOX,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__("storage", mailbox=open_mailbox(mailbox_bound), label=str(directory))
        self._directory = directory
        self._hub = hub
        self._mode = mode
        self._max_batch = max_batch
        self._options = store_options or {}
        self._thread: pykka.ActorRef[Any] | None = None
        self._inline: EventStore | None = None
        self.batches = 0
        self.ready = trio.Event()
        self.last_batch = 0

    # -- client side ------------------------------------------------------------------

    async def write(self, op: Callable[[WriteBatch], T], *, durable: bool = True) -> T:
        """Run *op* in the next group commit; return its value once the batch is durable.

        ``durable=False`` answers once the batch is written to the journal, while its
        fdatasync runs: the write is then ordered before every later write, survives a
        killed process, and is durable no later than the next durable write is
        answered; only a power loss before that can drop it. For writes whose loss
        would only make work be redone (a promotion before its provider turn).

        Raises whatever *op* raised (nothing of it was written), or StorageError when
        the commit failed or the actor stopped before answering (a restart: the write
        was not acknowledged; an exact retry is safe). Cancellation abandons the wait;
        the write may still commit.
        """
        try:
            result: T = await call(self, lambda reply: _Write(op, reply, durable))
        except (ActorCrashed, ActorStopped) as exc:
            raise StorageError(f"storage stopped before answering; not written: {exc}") from exc
        return result

    async def read(self, op: Callable[[EventStore], T]) -> T:
        """Run *op* against the store after the current batch; return its value."""
        try:
            result: T = await call(self, lambda reply: _Read(op, reply))
        except (ActorCrashed, ActorStopped) as exc:
            raise StorageError(f"storage stopped before answering: {exc}") from exc
        return result

    # -- actor side -------------------------------------------------------------------

    async def run(self) -> None:
        await self._start_backend()
        try:
            self.mark_running()
            self.ready.set()
            while True:
                batch = [await self.mailbox.receive()]
                while len(batch) < self._max_batch:
                    try:
                        batch.append(self.mailbox.receive_nowait())
                    except trio.WouldBlock:
                        break
                await self._serve(batch)
        finally:
            with trio.CancelScope(shield=True):
                await self._stop_backend()

    async def _serve(self, batch: list[_Request]) -> None:
        writes = [r for r in batch if isinstance(r, _Write)]
        reads = [r for r in batch if isinstance(r, _Read)]
        self.set_activity(f"committing {len(writes)} writes, {len(reads)} reads")
        if writes:
            delivered = answered_early = False
            early = not all(w.durable for w in writes)

            def deliver(outcomes: list[Outcome], events: list[StoredEvent]) -> None:
                nonlocal delivered
                delivered = True
                for request, outcome in zip(writes, outcomes, strict=True):
                    if request.durable or not answered_early:
                        _answer(request.reply, outcome)
                if events:
                    self._hub.publish(events)

            def written(outcomes: list[Outcome]) -> None:
                nonlocal answered_early
                answered_early = True
                for request, outcome in zip(writes, outcomes, strict=True):
                    if not request.durable:
                        _answer(request.reply, outcome)

            job = self._write_job([w.op for w in writes], deliver, written if early else None)
            outcomes, events = await self._run(job)
            if not delivered:
                deliver(outcomes, [])
            self.batches += 1
            self.last_batch = len(writes)
            if any(isinstance(o.error, StorageError) for o in outcomes):
                raise StorageError("the store failed a commit; restarting it")
        if reads:
            answers = await self._run(_read_job([r.op for r in reads]))
            for read, answer in zip(reads, answers, strict=True):
                _answer(read.reply, answer)
        self.set_activity("")

    def _write_job(
        self,
        ops: Sequence[Callable[[WriteBatch], Any]],
        deliver: Callable[[list[Outcome], list[StoredEvent]], None],
        written: Callable[[list[Outcome]], None] | None,
    ) -> Callable[[EventStore], tuple[list[Outcome], list[StoredEvent]]]:
        """The batch as a job: answers go out (on the trio thread) once it is journaled,
        those of non-durable writes as soon as it is written."""
        if self._mode == "inline":
            return lambda store: store.write_batch(ops, on_durable=deliver, on_written=written)
        token = trio.lowlevel.current_trio_token()

        def durable(outcomes: list[Outcome], events: list[StoredEvent]) -> None:
            token.run_sync_soon(deliver, outcomes, events)

        def ordered(outcomes: list[Outcome]) -> None:
            assert written is not None
            token.run_sync_soon(written, outcomes)

        on_written = None if written is None else ordered
        return lambda store: store.write_batch(ops, on_durable=durable, on_written=on_written)

    async def _run(self, job: Callable[[EventStore], T]) -> T:
        if self._mode == "inline":
            assert self._inline is not None
            return job(self._inline)
        assert self._thread is not None
        token = trio.lowlevel.current_trio_token()
        send, receive = trio.open_memory_channel[tuple[Any, BaseException | None]](1)

        def post(result: Any, error: BaseException | None) -> None:
            token.run_sync_soon(send.send_nowait, (result, error))

        self._thread.tell((job, post))
        with trio.CancelScope(shield=True):
            result, error = await receive.receive()
        if error is not None:
            raise StorageError(f"storage thread failed: {error}") from error
        return result

    async def _start_backend(self) -> None:
        if self._mode == "inline":
            self._inline = EventStore.open(self._directory, **self._options)
            return
        self._thread = _DuckThread.start(self._directory, self._options)
        await self._run(lambda store: None)

    async def _stop_backend(self) -> None:
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        if self._thread is not None:
            thread, self._thread = self._thread, None
            await trio.to_thread.run_sync(lambda: thread.stop(timeout=30))


def _read_job(ops: Sequence[Callable[[EventStore], Any]]) -> Callable[[EventStore], list[Outcome]]:
    def job(store: EventStore) -> list[Outcome]:
        outcomes = []
        for op in ops:
            try:
                outcomes.append(Outcome(value=op(store)))
            except Exception as exc:  # noqa: BLE001 - the error is the caller's answer
                outcomes.append(Outcome(error=exc))
        return outcomes

    return job


def _answer(reply: Reply[Any], outcome: Outcome) -> None:
    if outcome.error is not None:
        reply.fail(outcome.error)  # type: ignore[arg-type]
    else:
        reply.send(outcome.value)
