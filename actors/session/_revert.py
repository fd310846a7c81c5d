"""Revert and unrevert a session: the shell around the sans-IO planner ``runtime.revert``.

A revert reads the session's history and the before-images its file tools recorded, plans
(``plan_revert``), makes the plan durable (``session.reverted``, which holds the content
each file had before any revert) and only then writes the restored files. Unrevert writes
that content back first, then records ``session.unreverted``. A prompt admitted while a
revert stands first commits it (``session.revert.committed``): the hidden messages are
dropped for good.

Shell side effects (the ``shell`` tool, anything outside ``write``, ``edit`` and
``apply_patch``) are not tracked and not undone.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec
import trio
from msgspec import UNSET

from runtime import InvalidInputError, SessionInfo, SessionNotFoundError
from runtime import events as ev
from runtime.revert import (
    HIDDEN_OPEN,
    FileChange,
    SessionBusyError,
    close_hidden,
    file_changes,
    hidden_ranges,
    is_hidden,
    plan_revert,
    revert_paths,
    unrevert_files,
)
from runtime.tools import before_image
from storage import Append, EventsOfType, GetSession, History, PendingInputs

if TYPE_CHECKING:
    from actors.session._execution import SessionExecution
    from actors.store import StorageActor

__all__ = ["DEFAULT_MAX_IMAGES", "Reverted", "Reverts"]

_log = logging.getLogger("kittiwake.revert")
DEFAULT_MAX_IMAGES: Final = 10_000
"""Before-image events a revert reads (the latest ones); a revert reaching further back
than the oldest of them is refused."""
_CLEAR_KEPT: Final = 65_536
_IMAGE: Final = "session.tool.file.before"
_REVERTED: Final = "session.reverted"
_decode_image = msgspec.json.Decoder(ev.FileBeforeImage).decode
_decode_reverted = msgspec.json.Decoder(ev.SessionReverted).decode


class Reverted(msgspec.Struct, frozen=True, kw_only=True):
    """What a revert did: the session after it, the files it changed (OpenCode's
    ``FileDiff``), the files it could not restore, the messages it hid."""

    info: SessionInfo
    files: list[FileChange]
    skipped: list[str]
    hidden_ids: list[str]


class Reverts:
    """Revert, unrevert and commit for every session of a runtime (``rt.sessions.reverts``).

    Args:
        max_image_bytes: the largest current file content a revert keeps for unrevert
            (over it, that file is left as it is), as ``ToolEnvironment.before_image_max_bytes``.
        max_images: see ``DEFAULT_MAX_IMAGES``.
        shared: other processes write the same store (a cluster): a revert one of them
            made is not seen here, so ``standing`` reads the store every time.
    """

    def __init__(
        self, *, storage: StorageActor, execution: SessionExecution, now_ms: Callable[[], int],
        max_image_bytes: int = 1024 * 1024, max_images: int = DEFAULT_MAX_IMAGES,
        shared: bool = False,
    ) -> None:  # fmt: skip
        self._shared = shared
        self._storage = storage
        self._x = execution
        self._now = now_ms
        self._max_bytes = max_image_bytes
        self._max_images = max_images
        self._locks: dict[str, trio.Lock] = {}
        self._standing: set[str] = set()
        self._clear: OrderedDict[str, None] = OrderedDict()
        """Sessions seen without a revert (at most ``_CLEAR_KEPT``, least recent dropped)."""

    async def standing(self, session_id: str) -> bool:
        """Whether a revert of the session stands (or one is being made): a prompt must
        commit it first. Reads the store at most once per session (while remembered) and
        only for a session whose actor is not active and that was not created in this
        process (``SessionExecution.known_info``); reverts made by this object keep the
        answer current. When ``shared``, reads the store every time: another worker
        may have reverted the session."""
        if session_id in self._standing or session_id in self._locks:
            return True
        if session_id in self._clear and not self._shared:
            return False
        info = None if self._shared else self._x.known_info(session_id)
        if info is None:
            info = await self._storage.read(GetSession(session_id=session_id))
        if info is not None and info.revert is not UNSET:
            self._standing.add(session_id)
            return True
        self._clear[session_id] = None
        if len(self._clear) > _CLEAR_KEPT:
            self._clear.popitem(last=False)
        return False

    async def standing_here(self, session_id: str) -> bool:
        """Whether a prompt must commit a revert first, as far as this process can tell
        without reading the store when ``shared``: a revert made here stands, or one is
        being made. Another worker's revert is then found by the admission's own batch
        (``AdmitPrompt(unless_reverted=True)`` refused with ``RevertStands``). Not
        shared, as :meth:`standing`."""
        if not self._shared:
            return await self.standing(session_id)
        await trio.lowlevel.checkpoint()
        return session_id in self._standing or session_id in self._locks

    async def settled(self, session_id: str) -> None:
        """Return once no revert, unrevert or commit of *session_id* is under way: the files
        a revert restores are written by then (its ``session.reverted`` is durable before
        them). Cancellation stops waiting."""
        if session_id not in self._locks:
            await trio.lowlevel.checkpoint()
            return
        async with self._session_lock(session_id):
            pass

    async def revert(
        self, session_id: str, message_id: str, part_id: str | None = None, *, files: bool = True,
        part_name: str | None = None,
    ) -> Reverted:  # fmt: skip
        """Roll the session back to *message_id* (and *part_id*, a content id of that
        assistant message); with *files*, restore the files its file tools changed after
        that point. A standing revert moves (back, or forward: OpenCode's redo). The
        session's ``revert.part_id`` is *part_name* when given (the client's id of the part).

        Raises:
            SessionNotFoundError, SessionBusyError (a drain runs or prompts wait),
            MessageNotFoundError (no such visible message or part), InvalidInputError
            (the point is older than the before-images kept, ``max_images``).
        Cancellation: before the ``session.reverted`` write, nothing changed; after it,
            file writes finish in their worker thread.
        """
        async with self._session_lock(session_id):
            info = await self._idle_session(session_id)
            closed = close_hidden(hidden_ranges(info), None)  # a standing revert's rows count
            rows = [r for r in await self._storage.read(History(session_id=session_id))
                    if not is_hidden(r[0], closed)]  # fmt: skip
            images = await self._images(session_id)
            previous = await self._standing_revert(session_id) if info.revert is not UNSET else None
            target = next((seq for seq, m in rows if m.id == message_id), None)
            if target is not None and len(images) >= self._max_images and images[0][0] > target:
                raise InvalidInputError(
                    f"Cannot revert to {message_id}: it is older than the last "
                    f"{self._max_images} file changes kept for revert"
                )
            paths = revert_paths(
                rows, images, session_id=session_id, message_id=message_id, part_id=part_id,
                previous=previous,
            )  # fmt: skip
            current = await trio.to_thread.run_sync(self._read_current, paths)
            plan = plan_revert(
                rows, images, session_id=session_id, message_id=message_id, part_id=part_id,
                previous=previous, current=current, timestamp=self._now(),
            )  # fmt: skip
            event = plan.event
            if part_name is not None and part_id is not None:
                revert = msgspec.structs.replace(event.revert, part_id=part_name)
                event = msgspec.structs.replace(event, revert=revert)
            if not files:
                event = msgspec.structs.replace(event, files=previous.files if previous else [])
            await self._storage.write(Append(session_id=session_id, events=[event]))
            self._standing.add(session_id)
            self._clear.pop(session_id, None)
            changes: list[FileChange] = []
            skipped = list(plan.skipped)
            if files:
                before = {**current, **await trio.to_thread.run_sync(
                    self._read_current, [f.path for f in plan.restore if f.path not in current]
                )}  # fmt: skip
                skipped += await trio.to_thread.run_sync(_write_files, plan.restore)
                root = info.location.directory
                changes = file_changes(before, plan.restore, root=root)
            updated = await self._refresh(session_id)
            return Reverted(
                info=updated, files=changes, skipped=skipped, hidden_ids=plan.hidden_ids
            )

    async def unrevert(self, session_id: str) -> SessionInfo:
        """Show the hidden messages again and write back the content the reverted files had
        before the revert; the session unchanged when no revert stands.

        Raises SessionNotFoundError, SessionBusyError. Cancellation: file writes finish in
        their worker thread; the revert stands until ``session.unreverted`` is written
        (unrevert again then writes the same content).
        """
        async with self._session_lock(session_id):
            info = await self._idle_session(session_id)
            if info.revert is UNSET:
                self._standing.discard(session_id)
                return info
            previous = await self._standing_revert(session_id)
            if previous is not None:
                failed = await trio.to_thread.run_sync(_write_files, unrevert_files(previous))
                if failed:
                    _log.warning(
                        "unrevert left files", extra={"session": session_id, "files": failed}
                    )
            event = ev.SessionUnreverted(timestamp=self._now(), session_id=session_id)
            await self._storage.write(Append(session_id=session_id, events=[event]))
            self._standing.discard(session_id)
            return await self._refresh(session_id)

    async def commit(self, session_id: str) -> list[str]:
        """Drop the standing revert's hidden messages for good (``session.revert.committed``);
        return their ids (none when no revert stands). Files stay as they are.

        Raises SessionNotFoundError.
        """
        async with self._session_lock(session_id):
            info = await self._storage.read(GetSession(session_id=session_id))
            if info is None:
                raise SessionNotFoundError(session_id)
            self._standing.discard(session_id)
            if info.revert is UNSET:
                return []
            opened = [r for r in hidden_ranges(info) if r[1] == HIDDEN_OPEN]
            rows = await self._storage.read(History(session_id=session_id))
            removed = [m.id for seq, m in rows if is_hidden(seq, opened)]
            event = ev.RevertCommitted(
                timestamp=self._now(), session_id=session_id, message_ids=removed
            )
            await self._storage.write(Append(session_id=session_id, events=[event]))
            await self._refresh(session_id)
            return removed

    # -- helpers ---------------------------------------------------------------------------

    def _session_lock(self, session_id: str) -> _Held:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = trio.Lock()
        return _Held(self._locks, session_id, lock)

    async def _idle_session(self, session_id: str) -> SessionInfo:
        info = await self._storage.read(GetSession(session_id=session_id))
        if info is None:
            raise SessionNotFoundError(session_id)
        if session_id in self._x.busy_sessions():
            raise SessionBusyError(session_id)
        waiting = await self._storage.read(PendingInputs(session_id=session_id))
        if waiting:
            raise SessionBusyError(session_id)
        return info

    async def _images(self, session_id: str) -> list[tuple[int, ev.FileBeforeImage]]:
        query = EventsOfType(types=[_IMAGE], limit=self._max_images, session_id=session_id)
        return [(s.seq, _decode_image(s.data)) for s in await self._storage.read(query)]

    async def _standing_revert(self, session_id: str) -> ev.SessionReverted | None:
        query = EventsOfType(types=[_REVERTED], limit=1, session_id=session_id)
        found = await self._storage.read(query)
        return _decode_reverted(found[-1].data) if found else None

    def _read_current(self, paths: list[str]) -> dict[str, ev.FileImage]:
        current: dict[str, ev.FileImage] = {}
        for path in paths:
            try:
                image = before_image(path, self._max_bytes)
            except OSError as exc:
                _log.warning(
                    "revert could not read a file", extra={"path": path, "error": str(exc)}
                )
                continue
            if image is not None:
                current[path] = image
        return current

    async def _refresh(self, session_id: str) -> SessionInfo:
        """The session's info after a change, also handed to its active actor."""
        info = await self._storage.read(GetSession(session_id=session_id))
        if info is None:
            raise SessionNotFoundError(session_id)
        self._x.refresh_info(info)
        return info


class _Held:
    """Holds a session's lock; forgets the lock when nobody else waits for it."""

    def __init__(self, locks: dict[str, trio.Lock], session_id: str, lock: trio.Lock) -> None:
        self._locks, self._id, self._lock = locks, session_id, lock

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()
        if not self._lock.statistics().tasks_waiting and self._locks.get(self._id) is self._lock:
            del self._locks[self._id]


def _write_files(images: list[ev.FileImage]) -> list[str]:
    """Give each file the content of its image (``None``: remove it); return the paths that
    could not be written (logged)."""
    failed: list[str] = []
    for image in images:
        try:
            if image.content is None:
                if os.path.lexists(image.path):
                    os.unlink(image.path)
                continue
            os.makedirs(os.path.dirname(image.path), exist_ok=True)
            with open(image.path, "wb") as handle:
                handle.write(image.content)
        except OSError as exc:
            _log.warning(
                "revert could not write a file", extra={"path": image.path, "error": str(exc)}
            )
            failed.append(image.path)
    return failed
