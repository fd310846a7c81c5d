"""The interface the session layer drives."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from ._events import LLMEvent
from ._schema import LLMRequest

__all__ = ["LLMClient"]


class LLMClient(Protocol):
    """Streams one provider turn.

    ``stream`` is an async generator. Failures arrive as a final ``ProviderError``
    event rather than an exception; cancelling the consumer (or closing the
    generator) closes the underlying connection and re-raises ``trio.Cancelled``.
    """

    def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        """Yield the events of one provider turn for *request*."""
        ...
