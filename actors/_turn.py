"""One provider turn: stream the model, make events durable, run local tools eagerly.

Durable events from the stream are buffered and written together when a local
tool is about to start (its ``tool.called`` must be durable first) and when the
stream closes; live-only deltas go to subscribers at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import msgspec
import trio

from actors._events import EventHub
from runtime import _schema as ev
from runtime import llm
from runtime.agents import AgentInfo, PermissionGate
from runtime.tools import ToolContext, ToolFailure, ToolRegistry, ToolSettlement

__all__ = ["INTERRUPTED_TOOL", "Turn", "TurnOutcome", "run_turn"]

_log = logging.getLogger("kittiwake.turn")
INTERRUPTED_TOOL: Final = "Tool execution interrupted"
_SETTLE_GRACE: Final = 10.0


class TurnOutcome(msgspec.Struct, kw_only=True):
    """What one provider turn did."""

    assistant_message_id: str
    local_tools: int = 0
    error: str | None = None
    finish: str = ""
    pending: list[ev.InputAdmitted] = []


class Turn:
    """The state of one provider turn: buffered durable events, text accumulators, outcome."""

    def __init__(
        self, *, session_id: str, assistant_id: str, agent: AgentInfo, model: ev.ModelRef,
        append: Callable[[list[ev.DurableEvent]], Awaitable[list[ev.InputAdmitted]]], hub: EventHub, now: Callable[[], int],
        registry: ToolRegistry, directory: str, permissions: PermissionGate | None = None,
    ) -> None:  # fmt: skip
        self.session_id = session_id
        self.assistant_id = assistant_id
        self.agent = agent
        self.model = model
        self._append = append
        self._hub = hub
        self._now = now
        self._registry = registry
        self._directory = directory
        self._permissions = permissions
        self.buffer: list[ev.DurableEvent] = []
        self.texts: dict[str, list[str]] = {}
        self.outcome = TurnOutcome(assistant_message_id=assistant_id)
        self.usage = ev.TokenUsage()

    def _base(self) -> dict[str, Any]:
        return {"timestamp": self._now(), "session_id": self.session_id}

    def _ids(self) -> dict[str, Any]:
        return {**self._base(), "assistant_message_id": self.assistant_id}

    async def flush(self) -> None:
        if self.buffer:
            batch, self.buffer = self.buffer, []
            self.outcome.pending = await self._append(batch)

    def start_step(self) -> None:
        self.buffer.append(ev.StepStarted(**self._ids(), agent=self.agent.name, model=self.model))

    async def handle(self, event: llm.LLMEvent, nursery: trio.Nursery | None) -> None:
        """Fold one stream event into the turn; a local tool call starts in *nursery*
        (which must be given for one)."""
        ids = self._ids()
        match event:
            case llm.TextStart(id=part):
                self.texts[part] = []
                self.buffer.append(ev.TextStarted(**ids, text_id=part))
            case llm.TextDelta(id=part, delta=delta):
                self.texts.setdefault(part, []).append(delta)
                self._hub.publish_delta(ev.TextDelta(**ids, text_id=part, delta=delta))
            case llm.TextEnd(id=part):
                text = "".join(self.texts.pop(part, []))
                self.buffer.append(ev.TextEnded(**ids, text_id=part, text=text))
            case llm.ReasoningStart(id=part, provider_metadata=meta):
                self.texts[part] = []
                self.buffer.append(ev.ReasoningStarted(**ids, reasoning_id=part, **_meta(meta)))
            case llm.ReasoningDelta(id=part, delta=delta):
                self.texts.setdefault(part, []).append(delta)
                self._hub.publish_delta(ev.ReasoningDelta(**ids, reasoning_id=part, delta=delta))
            case llm.ReasoningEnd(id=part, provider_metadata=meta):
                text = "".join(self.texts.pop(part, []))
                ended = ev.ReasoningEnded(**ids, reasoning_id=part, text=text, **_meta(meta))
                self.buffer.append(ended)
            case llm.ToolInputStart(call_id=call, name=name):
                self.texts[call] = []
                self.buffer.append(ev.ToolInputStarted(**ids, call_id=call, name=name))
            case llm.ToolInputDelta(call_id=call, delta=delta):
                self.texts.setdefault(call, []).append(delta)
                self._hub.publish_delta(ev.ToolInputDelta(**ids, call_id=call, delta=delta))
            case llm.ToolInputEnd(call_id=call):
                text = "".join(self.texts.pop(call, []))
                self.buffer.append(ev.ToolInputEnded(**ids, call_id=call, text=text))
            case llm.ToolCall():
                await self._tool_call(event, nursery)
            case llm.HostedToolResult(call_id=call, result=result):
                provider = ev.ToolProvider(executed=True)
                self.buffer.append(
                    ev.ToolSuccess(**ids, call_id=call, result=result, provider=provider)
                )
            case llm.StepFinish(finish_reason=finish, usage=usage):
                self.outcome.finish = finish
                self.usage = _tokens(usage)
            case llm.ProviderError(message=message):
                self.outcome.error = message

    async def _tool_call(self, call: llm.ToolCall, nursery: trio.Nursery | None) -> None:
        provider = ev.ToolProvider(executed=call.provider_executed)
        called = ev.ToolCalled(
            **self._ids(), call_id=call.call_id, tool=call.name, input=call.input, provider=provider
        )
        self.buffer.append(called)
        if call.provider_executed:
            return
        assert nursery is not None, "a local tool call needs the turn's tool nursery"
        await self.flush()
        self.outcome.local_tools += 1
        nursery.start_soon(self._settle, call)

    async def _settle(self, call: llm.ToolCall) -> None:
        ctx = ToolContext(
            session_id=self.session_id, agent=self.agent.name, assistant_message_id=self.assistant_id,
            tool_call_id=call.call_id, directory=self._directory,
        )  # fmt: skip
        try:
            settlement = await self._registry.settle(
                call.name, call.input, ctx, agent=self.agent, permissions=self._permissions
            )
        except trio.Cancelled:
            with trio.move_on_after(_SETTLE_GRACE, shield=True):
                await self._append([self._settled(call, ToolFailure(error=INTERRUPTED_TOOL))])
            raise
        with trio.move_on_after(_SETTLE_GRACE, shield=True):
            await self._append([self._settled(call, settlement)])

    def _settled(self, call: llm.ToolCall, settlement: ToolSettlement) -> ev.DurableEvent:
        ids = {**self._ids(), "call_id": call.call_id}
        if isinstance(settlement, ToolFailure):
            return ev.ToolFailed(**ids, error=ev.SessionError(message=settlement.error))
        content = [_tool_content(part) for part in settlement.content]
        structured = settlement.structured if isinstance(settlement.structured, dict) else {}
        return ev.ToolSuccess(
            **ids, content=content, structured=structured, output_paths=settlement.output_paths
        )

    def end_event(self) -> ev.DurableEvent:
        if self.outcome.error is not None:
            error = ev.SessionError(message=self.outcome.error)
            return ev.StepFailed(**self._ids(), error=error)
        finish = self.outcome.finish or ("tool-calls" if self.outcome.local_tools else "stop")
        return ev.StepEnded(**self._ids(), finish=finish, tokens=self.usage)


async def run_turn(*, client: llm.LLMClient, request: llm.LLMRequest, turn: Turn) -> TurnOutcome:
    """Stream one provider turn to durable settlement.

    Cancellation (interrupt): unfinished local tools settle as "Tool execution
    interrupted", buffered events are flushed and the step ends ``interrupted``,
    all under a bounded shield; then ``trio.Cancelled`` propagates.
    Failure: a provider error event or a raised stream error ends the step failed.
    """
    turn.start_step()
    try:
        events = aiter(client.stream(request))
        first = await _fold(events, turn, None)
        if first is not None:
            # A local tool call: the rest of the stream runs beside the tools it starts.
            async with trio.open_nursery() as tools:
                await _fold(events, turn, tools, first)
                if turn.outcome.local_tools:
                    await turn.flush()
    except BaseException as exc:
        if not _cancelled(exc):
            raise
        with trio.move_on_after(_SETTLE_GRACE, shield=True):
            turn.buffer.append(ev.StepEnded(**turn._ids(), finish="interrupted"))
            await turn.flush()
        raise
    turn.buffer.append(turn.end_event())
    await turn.flush()
    return turn.outcome


async def _fold(
    events: AsyncIterator[llm.LLMEvent], turn: Turn, tools: trio.Nursery | None,
    first: llm.LLMEvent | None = None,
) -> llm.ToolCall | None:  # fmt: skip
    """Fold *first*, then *events*, into *turn* until they end. Without a tool nursery,
    stop at the first local tool call and return it unhandled, so a turn without one
    opens no nursery (whose exit is a schedule point). A provider failure ends the
    step: it becomes the turn's error."""
    try:
        if first is not None:
            await turn.handle(first, tools)
        async for event in events:
            if tools is None and isinstance(event, llm.ToolCall) and not event.provider_executed:
                return event
            await turn.handle(event, tools)
    except (trio.Cancelled, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - a provider failure ends the step
        _log.warning("provider stream failed", exc_info=exc)
        turn.outcome.error = f"{type(exc).__name__}: {exc}"
    return None


def _cancelled(exc: BaseException) -> bool:
    """True when *exc* is ``trio.Cancelled`` or a group made only of them."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_cancelled(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


def _meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    return {} if meta is None else {"provider_metadata": meta}


def _tokens(usage: llm.Usage) -> ev.TokenUsage:
    cache = ev.TokenCache(read=usage.cache_read_tokens, write=usage.cache_write_tokens)
    return ev.TokenUsage(
        input=usage.input_tokens, output=usage.output_tokens, reasoning=usage.reasoning_tokens,
        cache=cache,
    )  # fmt: skip


def _tool_content(part: Any) -> ev.ToolContent:
    if isinstance(part, llm.FilePart):
        return ev.ToolFileContent(uri=part.url, mime=part.mime)
    return ev.ToolTextContent(text=part.text)
