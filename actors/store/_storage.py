"""The StorageActor: trio's side of the one DuckDB connection.

Callers put operations on a bounded, thread-safe queue that the store's own
thread drains: everything queued when it finished the previous batch (up to
``max_batch``) becomes the next group commit. Callers are answered only after
their batch committed; group commit falls out of the queue filling while the
previous batch is being written. The store's thread never waits for the trio
thread between batches, so a busy event loop does not slow the commit pipeline.

Threaded mode (the default) runs the store in a pykka ``ThreadingActor`` that
owns the connection; answers come back through ``TrioToken.run_sync_soon``, one
callback per batch, so the trio thread never blocks on ``.get()``. Inline mode
drains the same queue on the trio thread, for deterministic simulation under a
mock clock.

The trio task of the actor owns the backend's lifecycle: it opens it, and
crashes (to be restarted by its supervisor, which reopens the store from the
journal) when the store fails a commit. Operations still queued then are
dropped and their callers get ``StorageError`` (not written; an exact retry is
safe). A batch whose journal write or fdatasync failed was not published, yet its pages
may have reached the file: once the store is reopened, and before it serves anything
newer, the events of such batches that it holds are published (per session, in seq
order), so a subscriber sees no gap.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, overload

import msgspec
import pykka
import trio
from opentelemetry import trace
from opentelemetry.context import attach, detach
from opentelemetry.trace import NonRecordingSpan, SpanContext

from actors.kernel import (
    Actor,
    ActorCrashed,
    ActorState,
    ActorStatistics,
    ActorStopped,
    EventHub,
    Reply,
    held,
    open_mailbox,
)
from runtime import StorageError
from runtime.telemetry import active_processor, current_span_context, recording
from storage import Command, Events, EventStore, Outcome, Query, StoredEvent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

    from storage import PostgresStore

__all__ = ["DRAIN_FENCE", "StorageActor", "StorageMode"]

T = TypeVar("T")
U = TypeVar("U")
StorageMode = Literal["threaded", "inline"]
DEFAULT_MAILBOX: Final = 8192
DEFAULT_MAX_BATCH: Final = 1024


DRAIN_FENCE: ContextVar[tuple[str, int] | None] = ContextVar("kittiwake_drain_fence", default=None)
"""The session the current task drives under a lease (cluster mode), and the lease's
fencing token: :meth:`StorageActor.write` stamps the token on that session's commands that
carry a ``fence``, so the store refuses them once another worker took the lease over."""


def _fenced(command: Command[Any], session_id: str, token: int) -> Command[Any]:
    if "fence" not in type(command).__struct_fields__:
        return command
    if getattr(command, "session_id", session_id) != session_id:
        return command  # another session's (a subagent's): its own lease fences it
    return msgspec.structs.replace(command, fence=token)


class _Write(msgspec.Struct, frozen=True):
    command: Command[Any]
    reply: Reply[Any]
    durable: bool = True
    then: Query[Any] | None = None
    trace: SpanContext | None = None
    """The caller's span, when spans are recorded: the parent of its batch's span."""


class _Read(msgspec.Struct, frozen=True):
    query: Query[Any]
    reply: Reply[Any]


_Request = _Write | _Read
_Post = Callable[..., None]


if TYPE_CHECKING:
    _Backend: TypeAlias = EventStore | PostgresStore


def _open_store(directory: Path, url: str | None, options: dict[str, Any]) -> _Backend:
    """The DuckDB store in *directory*, or with *url* the PostgreSQL store there."""
    if url is None:
        return EventStore.open(directory, **options)
    from storage import PostgresStore  # psycopg loads only for a PostgreSQL store

    return PostgresStore.open(url, directory=directory, **options)


class _DuckThread(pykka.ThreadingActor):
    """The pykka thread that owns the store. Every message is a job run on the store."""

    def __init__(self, directory: Path, url: str | None, options: dict[str, Any]) -> None:
        super().__init__()
        self._directory = directory
        self._url = url
        self._options = options
        self.store: _Backend | None = None

    def on_receive(self, message: Any) -> None:
        job: Callable[[_Backend | Exception], None] = message
        try:
            if self.store is None:
                self.store = _open_store(self._directory, self._url, self._options)
        except Exception as exc:  # noqa: BLE001 - handed to the job, which reports it
            job(exc)
        else:
            job(self.store)

    def on_stop(self) -> None:
        if self.store is not None:
            self.store.close()


class StorageActor(Actor[Any]):
    """Group-committing front of the event store; see the module docstring.

    Args:
        directory: the data dir.
        hub: where committed events are published after each batch.
        mode: ``"threaded"`` (pykka thread) or ``"inline"`` (trio thread).
        max_batch: most operations in one commit.
        mailbox_bound: most operations queued or in flight before senders wait.
        store_options: passed to :meth:`EventStore.open` (``fsync``, ``backup_every``).
        store_url: a PostgreSQL URL (``postgresql://...``): the store is there
            (``storage.PostgresStore``) instead of DuckDB in *directory*.
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
        store_url: str | None = None,
    ) -> None:
        # The mailbox carries nothing: requests go on the queue the store's thread drains.
        super().__init__("storage", mailbox=open_mailbox(0), label=str(directory))
        self._directory = directory
        self._hub = hub
        self._mode = mode
        self._max_batch = max_batch
        self._bound = mailbox_bound
        self._slots = trio.Semaphore(mailbox_bound)
        self._options = store_options or {}
        self._url = store_url
        self._thread: pykka.ActorRef[Any] | None = None
        self._inline: _Backend | None = None
        self._lock = threading.Lock()
        self._queue: deque[_Request] = deque()
        self._draining = False
        self._serving = False
        self._serving_changed = trio.Event()
        self._wake = trio.Event()
        self._failure: str | None = None
        self._failed = trio.Event()
        self._in_doubt: deque[tuple[str, int]] = deque()
        """(session, seq) of events of failed batches, not published: see the docstring."""
        self._token: trio.lowlevel.TrioToken | None = None
        self.batches = 0
        self.last_batch = 0
        self.peak_depth = 0
        self.requests = 0
        self.ready = trio.Event()
        self._processor: SpanProcessor | None = None
        """Where this runtime's spans go (taken at start), or None when none are recorded."""

    # -- client side ------------------------------------------------------------------

    @overload
    async def write(self, command: Command[T], *, durable: bool = True) -> T: ...

    @overload
    async def write(
        self, command: Command[T], *, durable: bool = True, then: Query[U]
    ) -> tuple[T, U]: ...

    async def write(
        self, command: Command[Any], *, durable: bool = True, then: Query[Any] | None = None
    ) -> Any:
        """Run *command* in the next group commit; return its answer once the batch is
        durable.

        ``durable=False`` answers once the batch is written to the journal, while its
        fdatasync runs: the write is then ordered before every later write, survives a
        killed process, and is durable no later than the next durable write is
        answered; only a power loss before that can drop it. For writes whose loss
        would only make work be redone (a promotion before its provider turn).

        With *then*, a query answered on the store right after the batch is journaled
        (so it sees the batch) and answered with it: ``(command's answer, then's)``,
        saving a separate read that would queue behind the fdatasync.

        Raises whatever the command raised (nothing of it was written), or StorageError
        when the commit failed or the actor stopped before answering (a restart: the
        write was not acknowledged; an exact retry is safe). Cancellation abandons the
        wait; the write may still commit.
        """
        caller = current_span_context() if self._processor is not None else None
        fence = DRAIN_FENCE.get()
        if fence is not None:
            command = _fenced(command, *fence)
        return await self._submit(_Write(command, Reply(), durable, then, caller))

    async def read(self, query: Query[T]) -> T:
        """Answer *query* after the writes queued before it; return the answer once
        everything it could have seen is durable.

        Raises what answering raised, or StorageError when the actor stopped first (or
        the sync it waited for failed). Cancellation abandons the wait.
        """
        result: T = await self._submit(_Read(query, Reply()))
        return result

    async def _submit(self, request: _Request) -> Any:
        while not self._serving or self._failure is not None:  # starting or restarting
            if self.state in ("passivated", "stopped", "dead"):
                raise StorageError(f"storage is {self.state}; not written")
            await self._serving_changed.wait()
        try:
            self._slots.acquire_nowait()  # no scheduling round unless the queue is full
        except trio.WouldBlock:
            await self._slots.acquire()
        reply = request.reply
        try:
            with held(self, reply):
                self._enqueue(request)
                try:
                    return await reply.wait()
                except (ActorCrashed, ActorStopped) as exc:
                    raise StorageError(f"storage stopped before answering: {exc}") from exc
        finally:
            self._slots.release()

    def _enqueue(self, request: _Request) -> None:
        with self._lock:
            self._queue.append(request)
            self.requests += 1
            self.peak_depth = max(self.peak_depth, len(self._queue))
            start = self._serving and not self._draining
            if start:
                self._draining = True
        if start:
            self._kick()

    def _kick(self) -> None:
        if self._mode == "inline":
            self._wake.set()
        else:
            assert self._thread is not None
            self._thread.tell(self._drain)

    def statistics(self) -> ActorStatistics:
        """The actor's statistics, with the request queue as its mailbox."""
        slots = self._slots.statistics()
        return msgspec.structs.replace(
            super().statistics(), mailbox_depth=len(self._queue), mailbox_bound=self._bound,
            mailbox_peak=self.peak_depth, blocked_senders=slots.tasks_waiting,
            messages_in=self.requests, messages_out=self.requests - len(self._queue),
        )  # fmt: skip

    # -- actor side -------------------------------------------------------------------

    async def run(self) -> None:
        self._failure, self._failed = None, trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        await self._start_backend()
        try:
            await self._publish_in_doubt()
            self.mark_running()
            self.ready.set()
            with self._lock:
                self._serving = True
                start = bool(self._queue) and not self._draining
                self._draining = self._draining or start
            if start:
                self._kick()
            self._note_serving()
            if self._mode == "inline":
                assert self._inline is not None
                while self._failure is None:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    self._drain(self._inline)
                    await trio.lowlevel.checkpoint()
            else:
                await self._failed.wait()
            raise StorageError(f"the store failed a commit; restarting it: {self._failure}")
        finally:
            with self._lock:
                self._serving = False
                dropped = list(self._queue)
                self._queue.clear()
            for request in dropped:  # never run: their callers may retry exactly
                request.reply._settle(StorageError("storage restarted before writing this"))
            self._note_serving()
            with trio.CancelScope(shield=True):
                await self._stop_backend()

    def _release(self, state: ActorState) -> None:
        super()._release(state)
        self._note_serving()  # callers waiting for a restart learn it is not coming

    def _note_serving(self) -> None:
        """Wake callers waiting for the actor to (re)start serving, or to stop for good."""
        self._serving_changed.set()
        self._serving_changed = trio.Event()

    # -- the store's thread ---------------------------------------------------------------

    def _drain(self, store: _Backend | Exception) -> None:
        """Serve batches until the queue is empty (on the store's thread)."""
        while True:
            with self._lock:
                if not self._queue or self._failure is not None or not self._serving:
                    self._draining = False
                    return
                batch = [
                    self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))
                ]
            if isinstance(store, Exception):
                self._fail(batch, f"the store did not open: {store}")
                continue
            try:
                self._serve(store, batch)
            except Exception as exc:  # noqa: BLE001 - reported to trio, which restarts us
                self._fail(batch, f"{type(exc).__name__}: {exc}")

    def _serve(self, store: _Backend, batch: list[_Request]) -> None:
        writes = [r for r in batch if isinstance(r, _Write)]
        reads = [r for r in batch if isinstance(r, _Read)]
        if writes:
            self._commit(store, writes)
        if reads:
            outcomes = store.answer_many([r.query for r in reads])
            replies = [r.reply for r in reads]
            if store.broken:  # a read found the store unusable: reopen it (before answering,
                self._report_failure("the store failed a read")  # so retries wait for that)

            def answer(error: BaseException | None) -> None:
                # Reads see written batches; they answer once those are durable.
                answers = outcomes if error is None else [Outcome(error=_lost(error))] * len(reads)
                self._post(_answer_all, replies, answers, [])

            store.after_durable(answer)

    def _commit(self, store: _Backend, writes: list[_Write]) -> None:
        """One group commit. *then* reads run on this thread once the batch is written;
        answers are posted early for non-durable writes, and for the rest when the
        batch is durable (from the store's sync thread in threaded mode)."""
        early = [w.reply for w in writes if not w.durable]
        thens = [w.then for w in writes]
        posted_early = False

        def on_written(outcomes: list[Outcome]) -> None:
            nonlocal posted_early
            if any(thens):
                outcomes[:] = [_then(store, o, t) for o, t in zip(outcomes, thens, strict=True)]
            if early:
                posted_early = True
                answers = [o for w, o in zip(writes, outcomes, strict=True) if not w.durable]
                self._post(_answer_all, early, answers, [])

        def on_durable(outcomes: list[Outcome], events: list[StoredEvent]) -> None:
            keep = [w.durable or not posted_early for w in writes]
            replies = [w.reply for w, k in zip(writes, keep, strict=True) if k]
            answers = [o for o, k in zip(outcomes, keep, strict=True) if k]
            self._post(_answer_all, replies, answers, events, self._hub)
            failed = next((o.error for o in outcomes if isinstance(o.error, StorageError)), None)
            if failed is not None:
                while store.in_doubt:  # deques: appended and taken on the failing thread
                    self._in_doubt.append(store.in_doubt.popleft())
                self._report_failure(str(failed))

        with _traced(self._processor, writes):
            store.write_batch(
                [w.command for w in writes], on_durable=on_durable,
                on_written=on_written if early or any(thens) else None,
            )  # fmt: skip
        self.batches += 1
        self.last_batch = len(writes)

    def _fail(self, batch: list[_Request], why: str) -> None:
        error = StorageError(f"storage failed; not written: {why}")
        self._post(_answer_all, [r.reply for r in batch], [Outcome(error=error)] * len(batch), [])
        self._report_failure(why)

    def _report_failure(self, why: str) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = why
        self._post(_set_event, self._failed)

    def _post(self, fn: _Post, *args: Any) -> None:
        if self._mode == "inline":
            fn(*args)
        else:
            assert self._token is not None
            self._token.run_sync_soon(fn, *args)

    # -- backend lifecycle --------------------------------------------------------------

    async def _start_backend(self) -> None:
        self._processor = active_processor()
        if self._mode == "inline":
            self._inline = _open_store(self._directory, self._url, self._options)
            return
        self._thread = _DuckThread.start(
            self._directory, self._url, {"sync_thread": True, **self._options}
        )
        opened = trio.Event()
        error: list[Exception] = []
        token = trio.lowlevel.current_trio_token()

        def probe(store: _Backend | Exception) -> None:
            if isinstance(store, Exception):
                error.append(store)
            token.run_sync_soon(opened.set)

        self._thread.tell(probe)
        with trio.CancelScope(shield=True):
            await opened.wait()
        if error:
            # The thread is not a daemon: left running, it would keep the process alive.
            with trio.CancelScope(shield=True):
                await self._stop_backend()
            raise StorageError(f"the store did not open: {error[0]}") from error[0]

    async def _publish_in_doubt(self) -> None:
        """Publish the events of failed batches that the reopened store holds.

        Runs before the store serves anything, so they come before every newer event.
        Raises StorageError when the store fails the read (they are tried again at the
        next start). Not cancellable (a bounded read of the store).
        """
        if not self._in_doubt:
            return
        wanted: dict[str, set[int]] = {}
        for session_id, seq in self._in_doubt:
            wanted.setdefault(session_id, set()).add(seq)
        queries = [
            Events(session_id=sid, after=min(seqs) - 1, limit=max(seqs) - min(seqs) + 1)
            for sid, seqs in sorted(wanted.items())
        ]
        found = await self._on_store(lambda store: [store.answer(q) for q in queries])
        self._in_doubt.clear()
        events = [e for page in found for e in page if e.seq in wanted[e.aggregate_id]]
        if events:
            self._hub.publish(events)

    async def _on_store(self, job: Callable[[_Backend], U]) -> U:
        """Run *job* on the open store (on its thread in threaded mode); return its
        answer or raise what it raised (StorageError when the store did not open)."""
        if self._mode == "inline":
            assert self._inline is not None
            return job(self._inline)
        assert self._thread is not None
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        outcome: list[Outcome] = []

        def run(store: _Backend | Exception) -> None:
            try:
                if isinstance(store, Exception):
                    raise StorageError(f"the store did not open: {store}") from store
                outcome.append(Outcome(value=job(store)))
            except Exception as exc:  # noqa: BLE001 - raised on the trio thread
                outcome.append(Outcome(error=exc))
            token.run_sync_soon(done.set)

        self._thread.tell(run)
        with trio.CancelScope(shield=True):
            await done.wait()
        if outcome[0].error is not None:
            raise outcome[0].error
        value: U = outcome[0].value
        return value

    async def _stop_backend(self) -> None:
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        if self._thread is not None:
            thread, self._thread = self._thread, None
            await trio.to_thread.run_sync(lambda: thread.stop(timeout=30))


@contextmanager
def _traced(processor: SpanProcessor | None, writes: list[_Write]) -> Iterator[None]:
    """Record the batch's span (in the store's thread) under its first traced writer's."""
    parent = next((w.trace for w in writes if w.trace is not None and w.trace.is_valid), None)
    if processor is None or parent is None:
        yield
        return
    with recording(processor):
        token = attach(trace.set_span_in_context(NonRecordingSpan(parent)))
        try:
            yield
        finally:
            detach(token)


def _then(store: _Backend, outcome: Outcome, then: Query[Any] | None) -> Outcome:
    if then is None or outcome.error is not None:
        return outcome
    try:
        return Outcome(value=(outcome.value, store.answer(then)))
    except Exception as exc:  # noqa: BLE001 - the error is the caller's answer
        return Outcome(error=exc)


def _answer_all(
    replies: Sequence[Reply[Any]], outcomes: Sequence[Outcome], events: list[StoredEvent],
    hub: EventHub | None = None,
) -> None:  # fmt: skip
    """Answer a batch's callers (on the trio thread), then publish what it committed.

    A reply already settled (answered early, abandoned, or failed by a crash) is skipped.
    """
    for reply, outcome in zip(replies, outcomes, strict=True):
        if reply.settled:
            continue
        if outcome.error is not None:
            reply.fail(outcome.error)  # type: ignore[arg-type]
        else:
            reply.send(outcome.value)
    if events and hub is not None:
        hub.publish(events)


def _lost(error: BaseException) -> StorageError:
    lost = StorageError(f"the store failed a commit: {error}")
    lost.__cause__ = error
    return lost


def _set_event(event: trio.Event) -> None:
    event.set()
