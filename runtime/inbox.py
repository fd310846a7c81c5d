"""Inbox rules, sans-IO: what a caller may admit, and which pending rows to promote."""

from runtime._inbox import ALL_ADMITTED as ALL_ADMITTED
from runtime._inbox import MAX_ATTACHMENTS as MAX_ATTACHMENTS
from runtime._inbox import MAX_PROMPT_BYTES as MAX_PROMPT_BYTES
from runtime._inbox import check_id as check_id
from runtime._inbox import check_prompt as check_prompt
from runtime._inbox import has_steer as has_steer
from runtime._inbox import to_promote as to_promote

__all__ = [
    "ALL_ADMITTED",
    "MAX_ATTACHMENTS",
    "MAX_PROMPT_BYTES",
    "check_id",
    "check_prompt",
    "has_steer",
    "to_promote",
]
