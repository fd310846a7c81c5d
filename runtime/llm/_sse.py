"""Server-Sent Events framing, sans-IO: bytes in, frames out."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

__all__ = ["FrameTooLargeError", "SSEDecoder", "SSEFrame", "encode_sse"]


class SSEFrame(msgspec.Struct, frozen=True, kw_only=True):
    """One dispatched event: the ``event:`` name (if any) and the joined ``data:`` lines."""

    data: str
    event: str | None = None


class FrameTooLargeError(ValueError):
    """A line or frame grew past the decoder's ``max_frame_bytes``."""


class SSEDecoder:
    """Incremental SSE parser, linear in the bytes fed however they are chunked.

    Args:
        max_frame_bytes: the largest line or frame accepted; beyond it ``feed``
            raises ``FrameTooLargeError`` instead of buffering without bound.

    Comments (``:``) are skipped, several ``data:`` lines join with ``\\n``, and a
    frame with no data is dropped. An unfinished line waits in a ``bytearray`` that each
    chunk extends in place; only a chunk's own bytes are searched for line ends, so a
    long line fed in many small chunks costs what it would in one. (httpx's
    ``aiter_lines`` would split lines, but without a bound on their length.)
    """

    def __init__(self, *, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        self._pending = bytearray()
        """The start of a line whose end has not arrived yet."""
        self._event: str | None = None
        self._data: list[str] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        """Consume *chunk* and return the frames it completed.

        Raises:
            FrameTooLargeError: an unfinished line or a frame is over ``max_frame_bytes``
                (the decoder is then unusable).
        """
        end = chunk.rfind(b"\n")
        if end < 0:
            self._pending += chunk
            if len(self._pending) > self._max:
                raise FrameTooLargeError(f"SSE line longer than {self._max} bytes")
            return []
        lines = chunk[:end].split(b"\n")
        if self._pending:
            self._pending += lines[0]
            lines[0] = bytes(self._pending)
            self._pending.clear()
        self._pending += chunk[end + 1 :]
        if len(self._pending) > self._max:
            raise FrameTooLargeError(f"SSE line longer than {self._max} bytes")
        frames: list[SSEFrame] = []
        for raw in lines:
            frame = self._line(raw[:-1] if raw.endswith(b"\r") else raw)
            if frame is not None:
                frames.append(frame)
        return frames

    def close(self) -> list[SSEFrame]:
        """Flush a final frame the server did not terminate with a blank line."""
        frames: list[SSEFrame] = []
        if self._pending:
            frame = self._line(bytes(self._pending).rstrip(b"\r"))
            self._pending.clear()
            if frame is not None:
                frames.append(frame)
        last = self._line(b"")
        if last is not None:
            frames.append(last)
        return frames

    def _line(self, raw: bytes) -> SSEFrame | None:
        if not raw:
            return self._dispatch()
        if raw[0] == 0x3A:  # ":" comment
            return None
        line = raw.decode("utf-8", errors="replace")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._size += len(raw)
            if self._size > self._max:
                raise FrameTooLargeError(f"SSE frame larger than {self._max} bytes")
        elif name == "event":
            self._event = value
        return None

    def _dispatch(self) -> SSEFrame | None:
        if not self._data:
            self._event = None
            return None
        frame = SSEFrame(data="\n".join(self._data), event=self._event)
        self._data = []
        self._event = None
        self._size = 0
        return frame


def encode_sse(frames: Iterable[SSEFrame]) -> bytes:
    """Render frames as SSE bytes (one ``data:`` line per data line)."""
    out: list[str] = []
    for frame in frames:
        if frame.event is not None:
            out.append(f"event: {frame.event}\n")
        for line in frame.data.split("\n"):
            out.append(f"data: {line}\n")
        out.append("\n")
    return "".join(out).encode()
