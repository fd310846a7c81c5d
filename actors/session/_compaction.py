"""One compaction attempt: the shell of ``runtime.compaction`` inside a session's drain.

``compaction.started`` is written durably first; the summary streams from the session's
model under the ``compaction`` agent, its text published as live-only
``compaction.delta``; ``compaction.ended`` stores the summary and the serialized recent
context and is the one event that moves the history boundary. An attempt that fails or
is interrupted (a SIGKILL included) writes no ``ended``, so the previous boundary stays.
Each attempt is one ``compaction`` span (reason, tokens before and after, duration,
outcome) and one structured log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import trio

from runtime import IdGenerator, SessionMessage, llm
from runtime import events as ev
from runtime.compaction import (
    COMPACTION_PROMPT,
    CompactionSettings,
    RequestChars,
    UsageMark,
    estimate_request,
    estimate_tokens,
    over_budget,
    plan_checkpoint,
    prune_calls,
    recent_context,
    summary_request,
)
from runtime.history import checkpoint_text, to_llm_model
from runtime.plugins import CompactionPrompt, LocationPlugins, SessionRef
from runtime.telemetry import span
from storage import Append

if TYPE_CHECKING:
    from actors.kernel import EventHub
    from actors.session._config import LocationSettings
    from actors.store import StorageActor

__all__ = [
    "CompactionAttempt",
    "Outcome",
    "RequestBudget",
    "attempt_for",
    "compact",
    "model_limit",
    "prune",
]

_log = logging.getLogger("kittiwake.compaction")
_SUMMARY_TIMEOUT: Final = 300.0
Outcome = Literal["completed", "skipped", "failed", "interrupted"]


@dataclass(frozen=True, slots=True)
class CompactionAttempt:
    """What one attempt needs: the session, why, its history and who writes the summary.

    Attributes:
        rows: the session's history, chronological (every message, hidden ones included).
        model: the model that writes the summary: the compaction agent's, else the
            session's for this turn.
        prompt: the compaction agent's prompt (``None``: the built-in one).
        context / output: the summarising model's window and output allowance (0: unknown).
        tokens_before: the estimated request the compaction replaces (for telemetry).
    """

    session_id: str
    reason: ev.CompactionReason
    overflow: bool
    rows: Sequence[tuple[int, SessionMessage]]
    model: ev.ModelRef
    prompt: str | None
    settings: CompactionSettings
    context: int
    output: int
    tokens_before: int


class RequestBudget:
    """One session's request estimates: the latest request's size, and the provider's
    count of it when it reported one, for estimating a later request extending it."""

    def __init__(self) -> None:
        self.estimate = 0
        """The estimated tokens of the latest request measured."""
        self.auto = True
        """Whether automatic compaction was on for it (``compaction.auto``)."""
        self._chars = 0
        self._chars_of = RequestChars()
        self._prefix: tuple[Any, ...] = ()
        self._known: tuple[tuple[Any, ...], UsageMark] | None = None

    def measure(self, request: llm.LLMRequest, prefix: tuple[Any, ...], *, auto: bool) -> int:
        """Estimate *request*, sent with *prefix* (model, baseline, checkpoint): from the
        provider's count of the previous request when it had the same prefix. *auto*:
        whether automatic compaction is on for it."""
        self._chars, self._prefix, self.auto = self._chars_of(request), prefix, auto
        known = self._known[1] if self._known and self._known[0] == prefix else None
        self.estimate = estimate_request(self._chars, known)
        return self.estimate

    def counted(self, usage: ev.TokenUsage | None) -> None:
        """The provider's usage of the request last measured (None: it failed)."""
        used = 0 if usage is None else usage.input + usage.cache.read + usage.cache.write
        self._known = (self._prefix, UsageMark(self._chars, used)) if used else None

    def over(self, client: llm.LLMClient, model: ev.ModelRef, settings: CompactionSettings) -> bool:
        """Whether the request last measured exceeds *model*'s budget (never when its
        limits are unknown)."""
        limit = model_limit(client, model)
        return limit is not None and over_budget(
            self.estimate, context=limit.context, output=limit.output, settings=settings
        )


def model_limit(client: llm.LLMClient, model: ev.ModelRef) -> llm.ModelLimit | None:
    """*model*'s token limits as *client* knows them; None when unknown."""
    if _knows_limits(type(client)):
        return cast(llm.ModelLimits, client).model_limit(to_llm_model(model))
    return None


@cache
def _knows_limits(kind: type[Any]) -> bool:
    """Whether clients of *kind* are ``llm.ModelLimits``, decided once per class: an
    ``isinstance`` against a runtime-checkable protocol walks the protocol's members each
    time (30-40 us, once per provider turn), and every client tells by its class."""
    return issubclass(kind, llm.ModelLimits)


def attempt_for(
    session_id: str, reason: ev.CompactionReason, *, overflow: bool,
    rows: Sequence[tuple[int, SessionMessage]], model: ev.ModelRef, settings: LocationSettings,
    client: llm.LLMClient, tokens_before: int,
) -> CompactionAttempt:  # fmt: skip
    """The attempt for a session whose turn runs on *model* in a Location with *settings*:
    the ``compaction`` agent's prompt and model when it has them, else the built-in prompt
    and *model*."""
    configured = settings.agents.get("compaction")
    model = ev.ModelRef.parse(configured.model if configured else None) or model
    limit = model_limit(client, model)
    return CompactionAttempt(
        session_id=session_id, reason=reason, overflow=overflow, rows=rows, model=model,
        prompt=configured.prompt if configured else None, settings=settings.compaction(),
        context=limit.context if limit else 0, output=limit.output if limit else 0,
        tokens_before=tokens_before,
    )  # fmt: skip


async def prune(
    storage: StorageActor, session_id: str, visible: Sequence[tuple[int, SessionMessage]],
    settings: CompactionSettings, now_ms: Callable[[], int],
) -> bool:  # fmt: skip
    """Prune old local tool results of the *visible* history (``runtime.compaction.
    prune_calls``) with one durable event; whether anything was pruned. Raises what the
    write raises."""
    calls = prune_calls(visible, settings)
    if not calls:
        return False
    pruned = ev.ToolResultsPruned(timestamp=now_ms(), session_id=session_id, calls=calls)
    await storage.write(Append(session_id=session_id, events=[pruned]))
    _log.info("pruned old tool results", extra={"session": session_id, "calls": len(calls)})
    return True


async def compact(
    attempt: CompactionAttempt, *, client: llm.LLMClient, storage: StorageActor, hub: EventHub,
    ids: IdGenerator, now_ms: Callable[[], int], summary_timeout: float = _SUMMARY_TIMEOUT,
    plugins: LocationPlugins | None = None,
) -> Outcome:  # fmt: skip
    """Run one compaction attempt; its outcome (``skipped``: no complete turn to compact,
    nothing written).

    Failure (a provider error, an empty summary, *summary_timeout* passing) is logged and
    returned as ``failed``: ``compaction.started`` stays without its ``ended``.
    Cancellation propagates after the span and log line record ``interrupted``; nothing
    more is written. Errors of the durable writes propagate. *plugins* (``session_compacting``)
    may add context to the summary's prompt or replace it.
    """
    sid, settings = attempt.session_id, attempt.settings
    plan = plan_checkpoint(attempt.rows)
    attributes: dict[str, str | bool | int] = {
        "session.id": sid, "compaction.reason": attempt.reason,
        "compaction.overflow": attempt.overflow, "compaction.tokens_before": attempt.tokens_before,
    }  # fmt: skip
    started = trio.current_time()
    outcome: Outcome = "interrupted"
    tokens_after = attempt.tokens_before
    with span("compaction", attributes) as current:
        try:
            if plan is None:
                outcome = "skipped"
                return outcome
            message_id = ids.new("msg")
            begun = ev.CompactionStarted(
                timestamp=now_ms(), session_id=sid, message_id=message_id, reason=attempt.reason
            )
            await storage.write(Append(session_id=sid, events=[begun]))
            request = summary_request(
                plan, model=to_llm_model(attempt.model),
                prompt=await _prompt(attempt, plugins), settings=settings,
                context=attempt.context, output=attempt.output,
            )  # fmt: skip
            summary: str | None = None
            with trio.move_on_after(summary_timeout):
                summary = await _summary(client, request, hub, sid, message_id, now_ms)
            if not summary:
                outcome = "failed"
                return outcome
            summary = summary[: settings.summary_tokens * 4]
            recent = recent_context(
                plan, keep_tokens=settings.keep_tokens, tool_chars=settings.tool_chars,
                tail_turns=settings.tail_turns,
            )  # fmt: skip
            ended = ev.CompactionEnded(
                timestamp=now_ms(), session_id=sid, message_id=message_id, reason=attempt.reason,
                text=summary, recent=recent, boundary_seq=plan.boundary_seq,
            )  # fmt: skip
            await storage.write(Append(session_id=sid, events=[ended]))
            tokens_after = estimate_tokens(len(checkpoint_text(summary, recent)))
            outcome = "completed"
            return outcome
        except Exception:
            outcome = "failed"
            raise
        finally:
            duration = trio.current_time() - started
            current.set_attribute("compaction.outcome", outcome)
            current.set_attribute("compaction.tokens_after", tokens_after)
            current.set_attribute("compaction.duration_ms", round(duration * 1000, 3))
            _log.info(
                "compaction %s", outcome,
                extra={**attributes, "outcome": outcome, "tokens_after": tokens_after,
                       "duration_ms": round(duration * 1000, 3)},
            )  # fmt: skip


async def _prompt(attempt: CompactionAttempt, plugins: LocationPlugins | None) -> str:
    """The summary request's prompt: the agent's or the built-in one, as the plugins'
    ``session_compacting`` shape it (their context lines appended, or their prompt)."""
    prompt = attempt.prompt or COMPACTION_PROMPT
    if plugins is None:
        return prompt
    session = SessionRef(session_id=attempt.session_id, directory=plugins.directory)
    shaped = await plugins.compaction(session, CompactionPrompt(prompt=attempt.prompt))
    return "\n\n".join([shaped.prompt or prompt, *shaped.context])


async def _summary(
    client: llm.LLMClient, request: llm.LLMRequest, hub: EventHub, session_id: str,
    message_id: str, now_ms: Callable[[], int],
) -> str | None:  # fmt: skip
    """The summary one streamed answer holds, its text published live as it arrives;
    None when the provider failed (logged). The stream is closed however this ends."""
    parts: list[str] = []
    events = client.stream(request)
    try:
        async for event in events:
            if isinstance(event, llm.TextDelta):
                parts.append(event.delta)
                hub.publish_delta(
                    ev.CompactionDelta(
                        timestamp=now_ms(), session_id=session_id, message_id=message_id,
                        text=event.delta,
                    )
                )  # fmt: skip
            elif isinstance(event, llm.ProviderError):
                _log.warning(
                    "compaction summary failed",
                    extra={"session": session_id, "kind": event.kind, "error": event.message},
                )
                return None
    except Exception as exc:  # noqa: BLE001 - a failed summary leaves the boundary as it was
        _log.warning("compaction summary failed", extra={"session": session_id}, exc_info=exc)
        return None
    finally:
        close = getattr(events, "aclose", None)  # an async generator's; a plain iterator has none
        if close is not None:
            await close()
    return "".join(parts).strip()
