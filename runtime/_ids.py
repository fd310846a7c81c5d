"""Identifiers: a prefix, 14 hex characters of time and counter, then 12 base62 characters.

Ids from one generator ascend strictly, so sorting ids sorts by creation time
within a process and, across processes, to the millisecond.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable
from typing import Final, Literal

__all__ = ["ID_PATTERNS", "IdGenerator", "IdPrefix", "derived_id", "is_valid_id"]

IdPrefix = Literal["ses", "msg", "evt", "prt", "tool", "per", "call", "que"]

_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_RANDOM_CHARS: Final = 12
_COUNTER_BITS: Final = 12
# Two base62 characters per 12 random bits (each 6-bit half taken modulo 62: a slight
# bias towards the first two symbols, about 71 bits of entropy per 12 characters).
_PAIRS: Final = tuple(_BASE62[(k >> 6) % 62] + _BASE62[(k & 63) % 62] for k in range(4096))

ID_PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    prefix: re.compile(rf"^{prefix}_[0-9a-f]{{14}}[0-9A-Za-z]{{12}}$")
    for prefix in ("ses", "msg", "evt", "prt", "tool", "per", "call", "que")
}
_ANY_ID: Final = re.compile(r"^[a-z]{3,4}_[0-9A-Za-z_\-]{1,96}$")


def is_valid_id(prefix: IdPrefix, value: str, *, strict: bool = False) -> bool:
    """Tell whether *value* is an id with *prefix*.

    Caller-supplied ids need only the prefix and a short safe body; ``strict``
    demands the exact generated shape.
    """
    if strict:
        return ID_PATTERNS[prefix].match(value) is not None
    return value.startswith(prefix + "_") and _ANY_ID.match(value) is not None


class IdGenerator:
    """Make ascending ids from an injected clock and random source.

    Args:
        clock_ms: milliseconds since the epoch; defaults to the wall clock.
        rng: source of the random suffix; defaults to a fresh ``random.Random``.
    """

    def __init__(
        self,
        *,
        clock_ms: Callable[[], int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._rng = rng or random.Random()
        self._last = 0

    def new(self, prefix: IdPrefix) -> str:
        """Return a fresh id, greater than every id this generator made before."""
        stamp = self._clock_ms() << _COUNTER_BITS
        self._last = max(stamp, self._last + 1)
        head = format(self._last, "014x")
        bits = self._rng.getrandbits(6 * _RANDOM_CHARS)
        pairs = _PAIRS
        tail = (
            pairs[bits & 4095] + pairs[(bits >> 12) & 4095] + pairs[(bits >> 24) & 4095]
            + pairs[(bits >> 36) & 4095] + pairs[(bits >> 48) & 4095] + pairs[bits >> 60]
        )  # fmt: skip
        return f"{prefix}_{head}{tail}"


def derived_id(prefix: IdPrefix, stamp_ms: int, key: str) -> str:
    """The id of *prefix* at *stamp_ms* made from *key* instead of random characters: the
    same three give the same id, so every path that records one thing under it (an exact
    retry) records it once. It sorts with the ids generated in that millisecond."""
    head = format(stamp_ms << _COUNTER_BITS, "014x")
    bits = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=9).digest(), "big")
    tail = "".join(_PAIRS[(bits >> (12 * n)) & 4095] for n in range(_RANDOM_CHARS // 2))
    return f"{prefix}_{head}{tail}"
