"""The request body limit: what the gateway answers 413 above, and what ``kittiwake run``
checks a prompt against before it creates anything."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_MAX_BODY", "over_limit", "size_text"]

DEFAULT_MAX_BODY: Final = 1024 * 1024
"""The largest request body (bytes) a server takes unless told otherwise; websocket
messages share it."""
_KIB: Final = 1024


def size_text(size: int) -> str:
    """*size* in bytes, and in KiB or MiB when it is a whole number of them:
    ``1048576 bytes (1 MiB)``."""
    for unit, factor in (("MiB", _KIB * _KIB), ("KiB", _KIB)):
        if size >= factor and size % factor == 0:
            return f"{size} bytes ({size // factor} {unit})"
    return f"{size} bytes"


def over_limit(limit: int) -> str:
    """The message of a request body over *limit* bytes (``PayloadTooLargeError``)."""
    return f"The request body is over the limit of {size_text(limit)}"
