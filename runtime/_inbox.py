"""Admission rules for prompts and ids, sans-IO: what a caller may put in the inbox."""

from __future__ import annotations

from typing import Final

from runtime._errors import InvalidInputError
from runtime._ids import IdPrefix, is_valid_id
from runtime._schema import Delivery, Prompt

__all__ = ["MAX_ATTACHMENTS", "MAX_PROMPT_BYTES", "check_id", "check_prompt"]

MAX_PROMPT_BYTES: Final = 256 * 1024
"""Largest prompt text accepted, in UTF-8 bytes (documented in docs/storage.md)."""
MAX_ATTACHMENTS: Final = 64


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
