"""Compaction, sans-IO: the request budget, the checkpoint a compaction writes, the
summarising request and old tool-result pruning (see ``docs/execution.md``)."""

from runtime._compaction import COMPACTION_PROMPT as COMPACTION_PROMPT
from runtime._compaction import CheckpointPlan as CheckpointPlan
from runtime._compaction import CompactionSettings as CompactionSettings
from runtime._compaction import UsageMark as UsageMark
from runtime._compaction import estimate_request as estimate_request
from runtime._compaction import estimate_tokens as estimate_tokens
from runtime._compaction import over_budget as over_budget
from runtime._compaction import plan_checkpoint as plan_checkpoint
from runtime._compaction import prune_calls as prune_calls
from runtime._compaction import recent_context as recent_context
from runtime._compaction import request_chars as request_chars
from runtime._compaction import serialize_message as serialize_message
from runtime._compaction import summary_request as summary_request

__all__ = [
    "COMPACTION_PROMPT",
    "CheckpointPlan",
    "CompactionSettings",
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
