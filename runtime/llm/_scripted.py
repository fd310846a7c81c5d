"""A scripted ``LLMClient`` for tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from ._catalog import ModelLimit
from ._events import LLMEvent
from ._replay import replay_transport
from ._route import ProtocolName
from ._schema import LLMRequest, ModelRef

if TYPE_CHECKING:
    import httpx

__all__ = ["ScriptExhaustedError", "ScriptedLLM"]


class ScriptExhaustedError(RuntimeError):
    """``ScriptedLLM.stream`` was called more times than there are scripts."""


class ScriptedLLM:
    """Replays one script of events per ``stream`` call.

    Args:
        scripts: a sequence of scripts used in order, or a function computing the
            script from the request.
        latency: seconds to ``trio.sleep`` before the first event of each stream.
        event_checkpoints: yield to the scheduler after every event, as events that
            arrive one network read at a time would. ``False`` delivers each script
            after the one ``latency`` sleep, as an answer arriving in a single read
            does (what a zero-latency provider's SSE body does through
            ``stream_wire``); benchmarks of the runtime's own overhead use that.
        limit: the token limits every model has (``ModelLimits``); ``None``: unknown,
            so no request is ever over budget.

    Every request is appended to ``requests`` before anything else happens, even
    when the scripts have run out.
    """

    def __init__(
        self,
        scripts: Sequence[Sequence[LLMEvent]] | Callable[[LLMRequest], Sequence[LLMEvent]],
        *,
        latency: float = 0.0,
        event_checkpoints: bool = True,
        limit: ModelLimit | None = None,
    ) -> None:
        self._scripts = scripts
        self._limit = limit
        self._latency = latency
        self._event_checkpoints = event_checkpoints
        self._next = 0
        self.requests: list[LLMRequest] = []

    def model_limit(self, model: ModelRef) -> ModelLimit | None:
        """The limits given at construction, for any model."""
        return self._limit

    def _script_for(self, request: LLMRequest) -> Sequence[LLMEvent]:
        if callable(self._scripts):
            return self._scripts(request)
        if self._next >= len(self._scripts):
            raise ScriptExhaustedError(
                f"ScriptedLLM has {len(self._scripts)} script(s) and all were used; "
                f"stream call #{self._next + 1} for model "
                f"{request.model.provider_id}/{request.model.model_id} has none"
            )
        script = self._scripts[self._next]
        self._next += 1
        return script

    def replay_transport(
        self, protocol: ProtocolName
    ) -> tuple[httpx.MockTransport, list[httpx.Request]]:
        """An ``httpx.MockTransport`` that serves the scripts rendered as *protocol*'s
        SSE, for driving a real adapter (e.g. a ``ProviderClient``) end to end; and
        the list of HTTP requests it receives.

        Raises:
            TypeError: the scripts are computed from requests, not a sequence.
        """
        if callable(self._scripts):
            raise TypeError("replay_transport needs a sequence of scripts")
        return replay_transport(self._scripts, protocol)

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        """Yield the next script's events.

        Raises:
            ScriptExhaustedError: no script is left. Cancellation propagates from
                the latency sleep or (with ``event_checkpoints``) between events.
        """
        self.requests.append(request)
        script = self._script_for(request)
        await trio.sleep(self._latency)
        for event in script:
            yield event
            if self._event_checkpoints:
                await trio.lowlevel.checkpoint()
