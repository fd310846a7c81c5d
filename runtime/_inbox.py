"""Admission rules for prompts and ids, sans-IO: what a caller may put in the inbox."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from runtime._errors import InvalidInputError
from runtime._ids import IdPrefix, is_valid_id
from runtime._schema import Delivery, InputAdmitted, Prompt

__all__ = [
    "ALL_ADMITTED",
    "MAX_ATTACHMENTS",
    "MAX_PROMPT_BYTES",
    "check_id",
    "check_prompt",
    "has_steer",
    "to_promote",
]

MAX_PROMPT_BYTES: Final = 256 * 1024
"""Largest prompt text accepted, in UTF-8 bytes (documented in docs/storage.md)."""
MAX_ATTACHMENTS: Final = 64
ALL_ADMITTED: Final = 1 << 62
"""A promotion cutoff above every admitted seq."""


def check_prompt(prompt: Prompt, delivery: Delivery) -> None:
    """Reject a prompt that cannot be admitted.

    Raises:
        InvalidInputError: empty or oversized text, too many attachments, bad delivery.
    """
    if not prompt.text.strip():
        raise InvalidInputError("Prompt text is empty")
    size = len(prompt.text.encode())
    if size > MAX_PROMPT_BYTES:
        raise InvalidInputError(f"Prompt text is {size} bytes; the limit is {MAX_PROMPT_BYTES}")
    if len(prompt.files) + len(prompt.agents) > MAX_ATTACHMENTS:
        raise InvalidInputError(f"A prompt carries at most {MAX_ATTACHMENTS} attachments")
    if delivery not in ("steer", "queue"):
        raise InvalidInputError(f"Unknown delivery {delivery!r}; use 'steer' or 'queue'")


def check_id(prefix: IdPrefix, value: str) -> None:
    """Reject a caller-supplied id without *prefix* or with unsafe characters.

    Raises:
        InvalidInputError: the id is malformed.
    """
    if not is_valid_id(prefix, value):
        raise InvalidInputError(f"Malformed id {value!r}; expected {prefix}_ and [0-9A-Za-z_-]")


def has_steer(pending: Iterable[InputAdmitted]) -> bool:
    """Tell whether any of the *pending* inbox rows is a steer."""
    return any(row.delivery == "steer" for row in pending)


def to_promote(
    pending: Sequence[InputAdmitted], *, opening: bool, cutoff_seq: int = ALL_ADMITTED
) -> list[InputAdmitted]:
    """The promotion rule: which *pending* rows (in admission order) to promote now.

    Every pending steer admitted at or before *cutoff_seq*; when *opening* an activity,
    the oldest queued prompt is promoted instead if and only if no steer is pending
    (a queued prompt opens its own activity, never beside steers). Oldest first.
    """
    steers = [row for row in pending if row.delivery == "steer"]
    if opening and not steers:
        return [row for row in pending if row.delivery == "queue"][:1]
    return sorted((r for r in steers if r.admitted_seq <= cutoff_seq), key=_admitted)


def _admitted(row: InputAdmitted) -> int:
    return row.admitted_seq
