"""Which session each Slack thread continues, kept in a file so that a restart of the bot
(or of the server it drives) reattaches every thread (``ThreadMap``)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Final

import msgspec
import trio

__all__ = ["MAX_TAKEN", "Thread", "ThreadMap", "message_id"]

MAX_TAKEN = 64
"""How many of a thread's latest messages it remembers taking (``Thread.taken``)."""
_UNSAFE: Final = re.compile(r"[^0-9A-Za-z]")
_MAX_BODY: Final = 96
"""The longest id body the runtime takes from a caller (``msg_`` and 1 to 96 characters)."""


class Thread(msgspec.Struct, frozen=True, kw_only=True):
    """A Slack thread and the session it continues.

    ``ts`` is the thread's root message; ``owner`` the user who started it (who may answer
    its permission requests); ``used`` when it was last written to (ms since the epoch).
    ``reply`` is the message an answer is being streamed into (``None`` once it is whole),
    ``after`` the session's last seq before that answer's prompt. ``taken`` holds the ts
    of the thread's latest messages admitted (``MAX_TAKEN``), written after the admission,
    so that one delivered again (Slack retries an event it thinks was not received) gets
    no second reply. That it starts no second turn is the runtime's: each message is
    admitted under ``message_id``, so a delivery again is an exact retry.
    """

    team: str
    channel: str
    ts: str
    session_id: str
    owner: str
    used: int = 0
    reply: str | None = None
    after: int = 0
    taken: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return thread_key(self.team, self.channel, self.ts)

    def took(self, ts: str, used: int) -> Thread:
        """The thread having taken its message *ts* at *used* (ms since the epoch)."""
        taken = (*self.taken, ts)[-MAX_TAKEN:]
        return msgspec.structs.replace(self, used=used, taken=taken)


def thread_key(team: str, channel: str, ts: str) -> str:
    return f"{team}/{channel}/{ts}"


def message_id(team: str, channel: str, ts: str) -> str:
    """The runtime's message id of the Slack message *ts* of *channel* in *team*: the same
    for every delivery of it (``msg_slack-<team>-<channel>-<ts>``, each character outside
    ``[0-9A-Za-z]`` made ``-``); a digest of them when that is longer than the runtime
    takes (96 characters after ``msg_``)."""
    body = "-".join(_UNSAFE.sub("-", part) for part in ("slack", team, channel, ts))
    if len(body) > _MAX_BODY:
        digest = hashlib.sha256(f"{team}/{channel}/{ts}".encode()).hexdigest()
        body = f"slack-{digest[:64]}"
    return f"msg_{body}"


class _File(msgspec.Struct, frozen=True):
    threads: list[Thread] = []


class ThreadMap:
    """The thread-to-session map, in memory and in *path* (JSON, replaced whole).

    Each change is written to a new file that is flushed to disk and renamed over the old
    one before ``put`` returns, so a process killed at any point leaves the old map or the
    new one, never a torn one. One bot uses a map file at a time.
    """

    def __init__(self, path: Path, threads: dict[str, Thread]) -> None:
        self._path = path
        self._threads = threads
        self._lock = trio.Lock()

    @classmethod
    async def open(cls, path: Path) -> ThreadMap:
        """The map in *path* (empty when there is no file yet).

        Raises ``msgspec.DecodeError`` for a file that is not a map (left as it is)."""

        def read() -> dict[str, Thread]:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return {}
            return {t.key: t for t in msgspec.json.decode(data, type=_File).threads}

        return cls(path, await trio.to_thread.run_sync(read))

    def get(self, team: str, channel: str, ts: str) -> Thread | None:
        return self._threads.get(thread_key(team, channel, ts))

    def latest(self, team: str, channel: str, user: str) -> Thread | None:
        """The thread of *channel* that *user* started (or attached) used last."""
        mine = [
            t for t in self._threads.values()
            if t.team == team and t.channel == channel and t.owner == user
        ]  # fmt: skip
        return max(mine, key=lambda t: t.used, default=None)

    def streaming(self) -> list[Thread]:
        """The threads whose answer was being streamed when the map was last written."""
        return [t for t in self._threads.values() if t.reply is not None]

    async def put(self, thread: Thread) -> None:
        """Record *thread* (replacing the thread's former session), on disk before it
        returns. On cancellation the file holds the map before or after the change."""
        async with self._lock:
            await self._store(thread)

    async def settle(self, thread: Thread, reply: str) -> None:
        """Record that the answer in *reply* is whole, if the thread's answer streaming is
        still that one (a later one is left as it is)."""
        async with self._lock:
            current = self._threads.get(thread.key)
            if current is not None and current.reply == reply:
                await self._store(msgspec.structs.replace(current, reply=None))

    async def _store(self, thread: Thread) -> None:
        threads = {**self._threads, thread.key: thread}
        data = msgspec.json.encode(_File(sorted(threads.values(), key=lambda t: t.key)))
        await trio.to_thread.run_sync(self._write, data)
        self._threads = threads

    def _write(self, data: bytes) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        part = self._path.with_name(self._path.name + ".part")
        with open(part, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, self._path)
        folder = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
