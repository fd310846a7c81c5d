"""Cost of a step from its usage and the catalog's prices."""

from __future__ import annotations

from ._catalog import ModelCost
from ._schema import Usage

__all__ = ["LONG_CONTEXT_THRESHOLD", "step_cost"]

LONG_CONTEXT_THRESHOLD = 200_000
_PER_TOKEN = 1_000_000


def step_cost(usage: Usage, cost: ModelCost | None) -> float:
    """USD for one step; 0.0 when the model has no prices.

    Prompts above 200k tokens (input plus cache reads and writes) use the
    long-context prices when the catalog has them. Reasoning tokens are part of
    ``output_tokens`` and use the reasoning price when one is listed. Missing
    cache prices fall back to the input price.
    """
    if cost is None:
        return 0.0
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    if cost.over_200k is not None and prompt > LONG_CONTEXT_THRESHOLD:
        cost = cost.over_200k
    reasoning = usage.reasoning_tokens if cost.reasoning is not None else 0
    total = (
        usage.input_tokens * cost.input
        + (usage.output_tokens - reasoning) * cost.output
        + reasoning * (cost.reasoning or 0.0)
        + usage.cache_read_tokens * (cost.cache_read if cost.cache_read is not None else cost.input)
        + usage.cache_write_tokens
        * (cost.cache_write if cost.cache_write is not None else cost.input)
    )
    return total / _PER_TOKEN
