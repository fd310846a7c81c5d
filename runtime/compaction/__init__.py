"""Compaction, sans-IO: the request budget, the checkpoint a compaction writes, the
summarising request and old tool-result pruning (see ``docs/execution.md``)."""

from runtime.compaction._compaction import COMPACTION_PROMPT as COMPACTION_PROMPT
from runtime.compaction._compaction import CheckpointPlan as CheckpointPlan
from runtime.compaction._compaction import CompactionSettings as CompactionSettings
from runtime.compaction._compaction import RequestChars as RequestChars
from runtime.compaction._compaction import UsageMark as UsageMark
from runtime.compaction._compaction import estimate_request as estimate_request
from runtime.compaction._compaction import estimate_tokens as estimate_tokens
from runtime.compaction._compaction import over_budget as over_budget
from runtime.compaction._compaction import plan_checkpoint as plan_checkpoint
from runtime.compaction._compaction import prune_calls as prune_calls
from runtime.compaction._compaction import recent_context as recent_context
from runtime.compaction._compaction import request_chars as request_chars
from runtime.compaction._compaction import serialize_message as serialize_message
from runtime.compaction._compaction import summary_request as summary_request

__all__ = [
    "COMPACTION_PROMPT",
    "CheckpointPlan",
    "CompactionSettings",
    "RequestChars",
    "UsageMark",
    "estimate_request",
    "estimate_tokens",
    "over_budget",
    "plan_checkpoint",
    "prune_calls",
    "recent_context",
    "request_chars",
    "serialize_message",
    "summary_request",
]
