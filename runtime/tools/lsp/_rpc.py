"""JSON-RPC 2.0 with LSP's ``Content-Length`` framing (sans-IO)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = ["FrameError", "FrameReader", "encode_frame"]

_SEPARATOR: Final = b"\r\n\r\n"
_MAX_HEADER: Final = 8192


class FrameError(Exception):
    """The peer sent something that is not an LSP frame."""


def encode_frame(message: dict[str, Any]) -> bytes:
    """One message as ``Content-Length: N\\r\\n\\r\\n<json>``."""
    body = msgspec.json.encode(message)
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class FrameReader:
    """Turns received bytes into decoded messages.

    Args:
        max_frame: the largest body accepted; a bigger one raises ``FrameError``.
    """

    def __init__(self, max_frame: int) -> None:
        self._buffer = bytearray()
        self._max_frame = max_frame

    def feed(self, data: bytes | bytearray) -> list[Any]:
        """Add *data*; return every message now complete. Raises ``FrameError``."""
        self._buffer += data
        messages: list[Any] = []
        while True:
            end = self._buffer.find(_SEPARATOR)
            if end < 0:
                if len(self._buffer) > _MAX_HEADER:
                    raise FrameError("LSP header too long")
                return messages
            length = _content_length(bytes(self._buffer[:end]))
            if length > self._max_frame:
                raise FrameError(f"LSP message of {length} bytes is over {self._max_frame}")
            start = end + len(_SEPARATOR)
            if len(self._buffer) < start + length:
                return messages
            body = bytes(self._buffer[start : start + length])
            del self._buffer[: start + length]
            try:
                messages.append(msgspec.json.decode(body))
            except msgspec.DecodeError as exc:
                raise FrameError(f"undecodable LSP message: {exc}") from None


def _content_length(header: bytes) -> int:
    for line in header.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                return int(value.strip())
            except ValueError:
                break
    raise FrameError(f"LSP header without a valid Content-Length: {header[:200]!r}")
