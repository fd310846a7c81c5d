"""Admission rules for the Session inbox, sans-IO: what a caller may admit."""

from runtime._inbox import MAX_ATTACHMENTS as MAX_ATTACHMENTS
from runtime._inbox import MAX_PROMPT_BYTES as MAX_PROMPT_BYTES
from runtime._inbox import check_id as check_id
from runtime._inbox import check_prompt as check_prompt

__all__ = [
    "MAX_ATTACHMENTS",
    "MAX_PROMPT_BYTES",
    "check_id",
    "check_prompt",
]
