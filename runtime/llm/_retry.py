"""Retry policy: bounded attempts, backoff with jitter, ``retry-after`` first."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec
import trio
from opentelemetry import trace

from ._events import LLMEvent, ProviderError, StepStart

__all__ = ["RetryPolicy", "stream_with_retry"]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How retryable failures are retried.

    Args:
        max_attempts: total attempts, including the first (1 disables retries).
        base_delay: backoff for the first retry; doubles per attempt.
        max_delay: cap on computed backoff.
        max_retry_after: the longest server-requested wait honoured; a longer
            ``retry-after`` ends the stream with the error instead.
        jitter: backoff is multiplied by a uniform factor in ``1 ± jitter``
            (server-requested waits are exact).
    """

    max_attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    jitter: float = 0.2

    def delay(self, attempt: int, error: ProviderError, rng: random.Random) -> float | None:
        """Seconds before retry number *attempt* (1-based), or ``None`` to give up."""
        if error.kind != "retryable" or attempt >= self.max_attempts:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_after else None
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return backoff * rng.uniform(1 - self.jitter, 1 + self.jitter)


async def stream_with_retry(
    open_attempt: Callable[[], AsyncIterator[LLMEvent]],
    policy: RetryPolicy,
    *,
    rng: random.Random,
    sleep: Callable[[float], Awaitable[None]] = trio.sleep,
    on_retry: Callable[[int, float, ProviderError], None] | None = None,
) -> AsyncIterator[LLMEvent]:
    """Run attempts until one succeeds, fails terminally, or output has begun.

    A leading ``StepStart`` is held back until the next event so that a failure
    before any output can be retried invisibly; once anything else was yielded,
    a failure is passed through and never retried. Cancellation propagates from
    the backoff sleep and from the attempt, closing it.
    """
    attempt = 1
    while True:
        held: StepStart | None = None
        emitted = False
        failure: ProviderError | None = None
        stream = open_attempt()
        try:
            async for event in stream:
                if isinstance(event, StepStart) and not emitted:
                    held = event
                    continue
                if isinstance(event, ProviderError) and not emitted:
                    failure = event
                    break
                if held is not None:
                    yield held
                    held = None
                emitted = True
                yield event
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if failure is None:
            if held is not None:
                yield held
            return
        delay = policy.delay(attempt, failure, rng)
        if delay is None:
            yield failure
            return
        if on_retry is not None:
            on_retry(attempt, delay, failure)
        current = trace.get_current_span()
        if current.is_recording():  # the provider turn's span, when spans are recorded
            current.set_attribute("kittiwake.retries", attempt)
            current.add_event(
                "provider.retry",
                {"attempt": attempt, "delay_s": delay, "error": failure.message[:500]},
            )
        await sleep(delay)
        attempt += 1
