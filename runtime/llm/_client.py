"""The interface the session layer drives."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._events import LLMEvent
from ._schema import LLMRequest, ModelRef

if TYPE_CHECKING:
    from ._catalog import ModelLimit, ResolvedModel

__all__ = ["LLMClient", "ModelLimits", "ModelResolver"]


class LLMClient(Protocol):
    """Streams one provider turn.

    ``stream`` is an async generator. Failures arrive as a final ``ProviderError``
    event rather than an exception; cancelling the consumer (or closing the
    generator) closes the underlying connection and re-raises ``trio.Cancelled``.
    """

    def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        """Yield the events of one provider turn for *request*."""
        ...


@runtime_checkable
class ModelResolver(Protocol):
    """An ``LLMClient`` that can tell, before any turn, which models it reaches.

    ``ProviderClient`` is one (through its catalog, configured providers included); the
    session layer asks it to refuse an unknown model when a session selects one.
    """

    def resolve_model(self, model: ModelRef) -> ResolvedModel:
        """The catalog entry *model* routes to.

        Raises:
            CatalogError: unknown provider, model or variant.
        """
        ...


@runtime_checkable
class ModelLimits(Protocol):
    """An ``LLMClient`` that knows a model's token limits (its context window and output
    allowance), which request budgets and compaction are computed from.

    ``ProviderClient`` is one (from its catalog); ``ScriptedLLM`` is one when given limits.
    """

    def model_limit(self, model: ModelRef) -> ModelLimit | None:
        """*model*'s limits; None when they are unknown."""
        ...
