"""One provider turn: stream the model, make events durable, run local tools eagerly.

Durable events from the stream are buffered and written together when a local
tool is about to start (its ``tool.called`` must be durable first) and when the
stream closes; live-only deltas go to subscribers at once. A part's start is also
published at once, as an empty delta of that part, so that live subscribers learn the
parts in the order they started before the buffered events are written (OpenCode's
clients number them so).

Settling is total: every local tool call the turn records gets exactly one result
(success, failure, "Tool execution interrupted") however it ends, and a turn cut
short (interrupt, dropped connection, error event, internal failure) closes its
open text and reasoning with what was streamed before its step ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextvars import ContextVar
from functools import partial
from typing import Any, Final, Literal

import msgspec
import trio
from opentelemetry.trace import Status, StatusCode

from actors.kernel import EventHub
from runtime import events as ev
from runtime import llm
from runtime.agents import AgentInfo, PermissionGate
from runtime.drain import TurnEnded
from runtime.telemetry import records_text, span
from runtime.tools import (
    ToolContext,
    ToolFailure,
    ToolRegistry,
    ToolSettlement,
    reporting_output,
)
from runtime.tools import ToolSuccess as Succeeded
from storage import LeaseLost

__all__ = [
    "INTERRUPTED_TOOL", "NO_TOOLS", "Turn", "TurnOutcome", "failure_tag", "report_retry",
    "run_turn", "turn_attributes", "turn_report",
]  # fmt: skip

_log = logging.getLogger("kittiwake.turn")
INTERRUPTED_TOOL: Final = "Tool execution interrupted"
NO_TOOLS: Final = "Tools are not available for this request"
_CUT_TOOL: Final = "Tool call was cut short: the provider stream ended before it was complete"
_UNWRITTEN_CALL: Final = "Tool call not run: its record was not written in time"
_SETTLE_GRACE: Final = 10.0
_CLOSE_GRACE: Final = 5.0  # seconds to close a provider stream the turn stopped reading
_PartKind = Literal["text", "reasoning", "tool-input"]
_RETRIES: ContextVar[Callable[[int, float, llm.ProviderError], None] | None] = ContextVar(
    "kittiwake_turn_retries", default=None
)


def report_retry(attempt: int, delay: float, error: llm.ProviderError) -> None:
    """A provider client's ``on_retry``: the provider turn running in this context (task)
    publishes a live ``session.next.retried`` to its session's subscribers; outside a turn
    (titles, compaction) nothing happens."""
    report = _RETRIES.get()
    if report is not None:
        report(attempt, delay, error)


_OUTPUT: Final = (
    llm.TextStart,
    llm.ReasoningStart,
    llm.ToolInputStart,
    llm.ToolCall,
    llm.HostedToolResult,
)


class TurnOutcome(msgspec.Struct, kw_only=True):
    """What one provider turn did."""

    assistant_message_id: str
    local_tools: int = 0
    error: str | None = None
    error_kind: str = ""
    """The provider's classification of ``error`` (``llm.ProviderError.kind``), if any."""
    finish: str = ""
    pending: list[ev.InputAdmitted] = []
    output: bool = False
    """Whether the provider streamed any output (text, reasoning, a tool call)."""


class Turn:
    """The state of one provider turn: buffered durable events, text accumulators, outcome.

    ``offered`` names the tools the request offered (set by :func:`run_turn` from the
    request); a local call to any other tool settles failed and never runs.
    """

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
        self.offered: Collection[str] = frozenset()
        self._open: dict[str, _PartKind] = {}
        """Text, reasoning and tool-input parts started and not yet ended, in order."""
        self._hosted: list[str] = []
        """Provider-executed calls recorded without their result yet."""
        self.outcome = TurnOutcome(assistant_message_id=assistant_id)
        self.usage = ev.TokenUsage()
        self.cost = 0.0
        self.answer: list[str] = []
        """The text parts the model finished, in order."""
        self._started = time.perf_counter()
        self._first: float | None = None
        """When the stream's first event came (``perf_counter``), for time to first token."""

    def _base(self) -> dict[str, Any]:
        return {"timestamp": self._now(), "session_id": self.session_id}

    def _ids(self) -> dict[str, Any]:
        return {**self._base(), "assistant_message_id": self.assistant_id}

    async def flush(self) -> bool:
        """Write the buffered events; False when the write did not answer in time.

        Shielded, bounded by the settle grace: a cancellation arriving meanwhile is
        seen at the caller's next checkpoint, so a batch is never abandoned half-known
        (the buffer is emptied first). Past the grace the batch is abandoned and may
        still be written later, ordered before any later write. Raises what the write
        raised.
        """
        if not self.buffer:
            return True
        batch, self.buffer = self.buffer, []
        with trio.move_on_after(_SETTLE_GRACE, shield=True) as writing:
            self.outcome.pending = await self._append(batch)
        if writing.cancelled_caught:
            _log.error("turn events not written in time", extra={"session": self.session_id})
        return not writing.cancelled_caught

    def retried(self, attempt: int, delay: float, error: llm.ProviderError) -> None:
        """Publish that attempt *attempt* failed with *error* and the next starts in
        *delay* seconds (live only)."""
        now = self._now()
        self._hub.publish_delta(ev.Retried(
            **self._base(), attempt=attempt, error=ev.RetryError(message=error.message),
            next=now + round(delay * 1000),
        ))  # fmt: skip

    def start_step(self) -> None:
        self.buffer.append(ev.StepStarted(**self._ids(), agent=self.agent.name, model=self.model))

    def _start(self, part: str, kind: _PartKind) -> None:
        self.texts[part] = []
        self._open[part] = kind

    def _end(self, part: str) -> str:
        self._open.pop(part, None)
        return "".join(self.texts.pop(part, []))

    async def handle(self, event: llm.LLMEvent, nursery: trio.Nursery) -> None:
        """Fold one stream event into the turn; a local tool call starts in *nursery*."""
        if self._first is None:
            self._first = time.perf_counter()
        ids = self._ids()
        if isinstance(event, _OUTPUT):
            self.outcome.output = True
        match event:
            case llm.TextStart(id=part):
                self._start(part, "text")
                self.buffer.append(ev.TextStarted(**ids, text_id=part))
                self._hub.publish_delta(ev.TextDelta(**ids, text_id=part, delta=""))
            case llm.TextDelta(id=part, delta=delta):
                self.texts.setdefault(part, []).append(delta)
                self._hub.publish_delta(ev.TextDelta(**ids, text_id=part, delta=delta))
            case llm.TextEnd(id=part):
                text = self._end(part)
                self.answer.append(text)
                self.buffer.append(ev.TextEnded(**ids, text_id=part, text=text))
            case llm.ReasoningStart(id=part, provider_metadata=meta):
                self._start(part, "reasoning")
                self.buffer.append(ev.ReasoningStarted(**ids, reasoning_id=part, **_meta(meta)))
                self._hub.publish_delta(ev.ReasoningDelta(**ids, reasoning_id=part, delta=""))
            case llm.ReasoningDelta(id=part, delta=delta):
                self.texts.setdefault(part, []).append(delta)
                self._hub.publish_delta(ev.ReasoningDelta(**ids, reasoning_id=part, delta=delta))
            case llm.ReasoningEnd(id=part, provider_metadata=meta):
                text = self._end(part)
                ended = ev.ReasoningEnded(**ids, reasoning_id=part, text=text, **_meta(meta))
                self.buffer.append(ended)
            case llm.ToolInputStart(call_id=call, name=name):
                self._start(call, "tool-input")
                self.buffer.append(ev.ToolInputStarted(**ids, call_id=call, name=name))
                self._hub.publish_delta(ev.ToolInputDelta(**ids, call_id=call, delta=""))
            case llm.ToolInputDelta(call_id=call, delta=delta):
                self.texts.setdefault(call, []).append(delta)
                self._hub.publish_delta(ev.ToolInputDelta(**ids, call_id=call, delta=delta))
            case llm.ToolInputEnd(call_id=call):
                text = "".join(self.texts.pop(call, []))  # the call itself is still to come
                self.buffer.append(ev.ToolInputEnded(**ids, call_id=call, text=text))
            case llm.ToolCall():
                await self._tool_call(event, nursery)
            case llm.HostedToolResult(call_id=call, result=result):
                provider = ev.ToolProvider(executed=True)
                if call in self._hosted:
                    self._hosted.remove(call)
                self.buffer.append(
                    ev.ToolSuccess(**ids, call_id=call, result=result, provider=provider)
                )
            case llm.StepFinish(finish_reason=finish, usage=usage, cost=cost):
                self.outcome.finish = finish
                self.usage = _tokens(usage)
                self.cost = cost or 0.0
            case llm.ProviderError(message=message, kind=kind):
                self.outcome.error, self.outcome.error_kind = message, kind

    async def _tool_call(self, call: llm.ToolCall, nursery: trio.Nursery) -> None:
        """Record *call*; start a local one in *nursery*, unless the request did not offer
        its tool: then it settles failed at once and nothing runs.

        The ``tool.called`` write of a local call is shielded (see :meth:`flush`), so a
        call is never durable without the task that settles it having started.
        """
        if self._open.pop(call.call_id, None) is None:  # no input streamed: it starts here
            self._hub.publish_delta(
                ev.ToolInputDelta(**self._ids(), call_id=call.call_id, delta="")
            )
        self.texts.pop(call.call_id, None)
        provider = ev.ToolProvider(executed=call.provider_executed)
        called = ev.ToolCalled(
            **self._ids(), call_id=call.call_id, tool=call.name, input=call.input, provider=provider
        )
        self.buffer.append(called)
        if call.provider_executed:
            self._hosted.append(call.call_id)
            return
        self.outcome.local_tools += 1
        if call.name not in self.offered:
            refused = (
                NO_TOOLS
                if not self.offered
                else f"Tool {call.name} is not available for this request"
            )
            self.buffer.append(self._settled(call, ToolFailure(error=refused)))
            return
        if not await self.flush():  # written later if at all, and ordered before this
            self.buffer.append(self._settled(call, ToolFailure(error=_UNWRITTEN_CALL)))
            return
        nursery.start_soon(self._settle, call)

    async def _settle(self, call: llm.ToolCall) -> None:
        """Run *call* and record its one result.

        Cancellation, in any shape (bare, or a group from the tool's own nursery),
        records "Tool execution interrupted"; any other escaping error records a
        failure naming it. Either way the result is written under a bounded shield
        and the exception propagates.
        """
        ctx = ToolContext(
            session_id=self.session_id, agent=self.agent.name, assistant_message_id=self.assistant_id,
            tool_call_id=call.call_id, directory=self._directory,
        )  # fmt: skip
        attributes = {
            "session.id": self.session_id, "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
        }  # fmt: skip
        try:
            with (
                span("tool", attributes) as current,
                reporting_output(partial(self._output, call.call_id)),
            ):
                settlement = await self._registry.settle(
                    call.name, call.input, ctx, agent=self.agent, permissions=self._permissions,
                    before_change=partial(self._before_change, call.call_id),
                )  # fmt: skip
                _describe_tool(current, settlement)
        except BaseException as exc:
            error = (
                INTERRUPTED_TOOL if _cancelled(exc) else f"Tool execution failed: {_describe(exc)}"
            )
            with trio.move_on_after(_SETTLE_GRACE, shield=True):
                await self._append([self._settled(call, ToolFailure(error=error))])
            raise
        with trio.move_on_after(_SETTLE_GRACE, shield=True):
            await self._append([self._settled(call, settlement)])

    def _output(self, call_id: str, text: str) -> None:
        """Publish output a running tool produced (live only)."""
        self._hub.publish_delta(ev.ToolOutputDelta(**self._ids(), call_id=call_id, delta=text))

    async def _before_change(self, call_id: str, files: list[ev.FileImage]) -> None:
        """Make the previous content of the files call *call_id* is about to change durable
        (``session.tool.file.before``), so a revert can restore them. Raises what the
        write raised; the call then fails without changing anything."""
        if files:
            await self._append([ev.FileBeforeImage(**self._ids(), call_id=call_id, files=files)])

    def _settled(self, call: llm.ToolCall, settlement: ToolSettlement) -> ev.DurableEvent:
        ids = {**self._ids(), "call_id": call.call_id}
        if isinstance(settlement, ToolFailure):
            return ev.ToolFailed(**ids, error=ev.SessionError(message=settlement.error))
        content = [_tool_content(part) for part in settlement.content]
        structured = settlement.structured if isinstance(settlement.structured, dict) else {}
        return ev.ToolSuccess(
            **ids, content=content, structured=structured, output_paths=settlement.output_paths
        )

    def close_open(self, tool_error: str) -> None:
        """Buffer the end of every part still open: text and reasoning keep what was
        streamed; a tool input that never became a call, and a provider-executed call
        without its result, settle failed with *tool_error*."""
        ids = self._ids()
        for part, kind in list(self._open.items()):
            text = self._end(part)
            if kind == "text":
                self.buffer.append(ev.TextEnded(**ids, text_id=part, text=text))
            elif kind == "reasoning":
                self.buffer.append(ev.ReasoningEnded(**ids, reasoning_id=part, text=text))
            else:
                error = ev.SessionError(message=tool_error)
                self.buffer.append(ev.ToolFailed(**ids, call_id=part, error=error))
        for call in self._hosted:
            error = ev.SessionError(message=tool_error)
            provider = ev.ToolProvider(executed=True)
            self.buffer.append(ev.ToolFailed(**ids, call_id=call, error=error, provider=provider))
        self._hosted.clear()

    def end_events(self) -> None:
        """Buffer the step's end: open parts closed, then ``step.ended`` or, after a
        provider failure, ``step.failed``."""
        self.close_open(_CUT_TOOL)
        if self.outcome.error is not None:
            error = ev.SessionError(message=self.outcome.error)
            self.buffer.append(ev.StepFailed(**self._ids(), error=error))
            return
        finish = self.outcome.finish or ("tool-calls" if self.outcome.local_tools else "stop")
        ended = ev.StepEnded(**self._ids(), finish=finish, cost=self.cost, tokens=self.usage)
        self.buffer.append(ended)

    def describe(self, current: Any) -> None:
        """Set the turn's figures on its span *current*: tokens, cost, finish reason, time
        to first token, tools, error (and the answer's text when text is recorded)."""
        if not current.is_recording():
            return
        usage, outcome = self.usage, self.outcome
        figures: dict[str, Any] = {
            "gen_ai.usage.input_tokens": usage.input, "gen_ai.usage.output_tokens": usage.output,
            "kittiwake.tokens.cached": usage.cache.read, "kittiwake.tokens.reasoning": usage.reasoning,
            "kittiwake.cost": self.cost, "gen_ai.response.finish_reasons": [outcome.finish or ""],
            "kittiwake.tools": outcome.local_tools,
        }  # fmt: skip
        if self._first is not None:
            figures["kittiwake.ttft_ms"] = (self._first - self._started) * 1000
        current.set_attributes(figures)
        if outcome.error is not None:
            current.set_status(Status(StatusCode.ERROR, outcome.error))
        if records_text():
            answer = "".join(self.answer)
            current.set_attribute("kittiwake.answer", answer)


_PROVIDER_TAGS: Final = {"context_overflow": "ContextOverflowError", "auth": "ProviderAuthError"}


def failure_tag(turn: Turn | None) -> str:
    """The ``_tag`` of *turn*'s failed step: the provider's error by its kind, else an
    internal error (``run_turn`` closed the step on an escaping exception)."""
    outcome = turn.outcome if turn is not None else None
    if outcome is None or outcome.error is None:
        return "InternalError"
    return _PROVIDER_TAGS.get(outcome.error_kind, "ProviderError")


def turn_report(outcome: TurnOutcome, *, auto: bool) -> TurnEnded:
    """The drain planner's report of *outcome*: a context overflow before any output counts
    as one only while automatic compaction (*auto*) is on."""
    steers = queued = False
    for row in outcome.pending:
        if row.delivery == "steer":
            steers = True
        else:
            queued = True
    overflow = auto and outcome.error_kind == "context_overflow" and not outcome.output
    return TurnEnded(
        failed=outcome.error is not None, local_tools=outcome.local_tools,
        steers_pending=steers, queued_pending=queued, overflow=overflow,
    )  # fmt: skip


def turn_attributes(session_id: str, model: ev.ModelRef, step: int) -> dict[str, Any]:
    """The attributes a provider turn's span starts with."""
    return {
        "session.id": session_id, "gen_ai.provider.name": model.provider_id,
        "gen_ai.request.model": model.id, "kittiwake.step": step,
    }  # fmt: skip


def _describe_tool(current: Any, settlement: ToolSettlement) -> None:
    """Set a tool call's outcome, output bytes and whether it was bounded on its span."""
    if not current.is_recording():
        return
    size = sum(len(getattr(part, "text", "")) for part in settlement.content)
    bounded = isinstance(settlement, Succeeded) and bool(
        settlement.output_paths or settlement.lossy
    )
    current.set_attributes({
        "kittiwake.tool.outcome": "failed" if isinstance(settlement, ToolFailure) else "success",
        "kittiwake.tool.bytes": size, "kittiwake.tool.bounded": bounded,
    })  # fmt: skip
    if isinstance(settlement, ToolFailure):
        current.set_status(Status(StatusCode.ERROR, settlement.error[:500]))


def _offered(request: llm.LLMRequest) -> frozenset[str]:
    """The tools a model may call from its answer to *request*."""
    names = frozenset(tool.name for tool in request.tools)
    choice = request.tool_choice
    if choice == "none":
        return frozenset()
    if choice in ("auto", "required"):
        return names
    return names & {choice}


async def run_turn(*, client: llm.LLMClient, request: llm.LLMRequest, turn: Turn) -> TurnOutcome:
    """Stream one provider turn to durable settlement.

    Only the tools *request* offers can run from its answer. A stream cut short keeps
    what it streamed: open text and reasoning parts are closed with it.

    Cancellation (interrupt), in any exception shape: unfinished local tools settle
    as "Tool execution interrupted", open parts close, buffered events are flushed
    and the step ends ``interrupted``, all under a bounded shield; then the
    cancellation propagates.
    Failure: a provider error event or a raised stream error ends the step failed
    (returned as ``outcome.error``). Any other error (a storage write, a bug) also
    closes the step failed, as far as a bounded shielded write can, and propagates.
    """
    retries = _RETRIES.set(turn.retried)  # the client's retries are this turn's
    try:
        return await _run(client, request, turn)
    finally:
        _RETRIES.reset(retries)


async def _run(client: llm.LLMClient, request: llm.LLMRequest, turn: Turn) -> TurnOutcome:
    turn.offered = _offered(request)
    turn.start_step()
    events: AsyncIterator[llm.LLMEvent] | None = None
    try:
        events = aiter(client.stream(request))
        # The stream is read beside the local tools it starts; the nursery's exit waits
        # for their settlement.
        async with trio.open_nursery() as tools:
            await _fold(events, turn, tools)
            if turn.outcome.local_tools:
                await turn.flush()
    except BaseException as exc:
        cancelled = _cancelled(exc)
        with trio.CancelScope(shield=True):
            await _close_stream(events)
            try:
                turn.close_open(INTERRUPTED_TOOL if cancelled else _CUT_TOOL)
                if cancelled:
                    turn.buffer.append(ev.StepEnded(**turn._ids(), finish="interrupted"))
                else:
                    error = ev.SessionError(message=f"Internal error: {_describe(exc)}")
                    turn.buffer.append(ev.StepFailed(**turn._ids(), error=error))
                await turn.flush()
            except LeaseLost:  # cluster mode: another worker drives the session now
                _log.warning("the cut step was not closed: the lease was taken over")
            except Exception as closing:  # noqa: BLE001 - the original exception goes on
                _log.error("could not close the cut step", exc_info=closing)
        raise
    turn.end_events()
    await turn.flush()
    return turn.outcome


async def _close_stream(events: AsyncIterator[llm.LLMEvent] | None) -> None:
    """Close a provider stream the turn stopped reading (an interrupt, a failed write),
    so its connection closes now and not when the garbage collector finds it. Bounded;
    a failure to close is logged."""
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    with trio.move_on_after(_CLOSE_GRACE):
        try:
            await aclose()
        except Exception as exc:  # noqa: BLE001 - the turn's own error goes on
            _log.warning("closing the provider stream failed", exc_info=exc)


async def _fold(events: AsyncIterator[llm.LLMEvent], turn: Turn, tools: trio.Nursery) -> None:
    """Fold *events* into *turn* until they end; local tool calls start in *tools*. A
    provider failure (the stream raising) ends the step: it becomes the turn's error.
    Errors of the turn's own writes propagate."""
    while True:
        try:
            event = await anext(events, None)
        except Exception as exc:  # noqa: BLE001 - a provider failure ends the step
            _log.warning("provider stream failed", exc_info=exc)
            turn.outcome.error = f"{type(exc).__name__}: {exc}"
            return
        if event is None:
            return
        await turn.handle(event, tools)


def _cancelled(exc: BaseException) -> bool:
    """True when *exc* is ``trio.Cancelled`` or a group (nested any depth) made only of them."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_cancelled(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


def _describe(exc: BaseException) -> str:
    """The first error in *exc* that is not a cancellation, as ``Type: message``."""
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not _cancelled(e)]
        return _describe(inner[0]) if inner else _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"


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
