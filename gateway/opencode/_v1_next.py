"""OpenCode's V2 events on its V1 event streams: ``/event`` and ``/global/event`` carry
``session.next.*``, ``permission.v2.*`` and ``question.v2.*`` beside the V1 projection, as
OpenCode's ``/event`` does (its ``Event`` union holds both families).

``NextEvents`` turns one stream's hub items into those payloads (``{type, properties}``,
``properties`` being the event's data without Kittiwake's own fields), in OpenCode's order:
a step starts, then each part starts, streams its deltas and ends, then the step ends.
The runtime writes a step's durable events when the step ends (or a tool is called), after
its live deltas; so a step is announced (``session.next.step.started``, with the agent and
model of the session, as the V1 projection announces its assistant message) at the first
live item of it, and each text or reasoning part at its first delta (the turn publishes an
empty one as the part starts); the durable starts are then not sent again. A tool call's
input deltas are left out: they carry no tool name to announce the call with, and its
durable ``tool.input.started`` / ``tool.input.ended`` follow in order.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.http import permission_json, turn_agent_model
from gateway.opencode._session_tools import question_json
from gateway.opencode._v1_events import Lookup, Payload, payload
from gateway.opencode._v1_live import tag_of
from runtime import LiveDelta
from runtime import events as ev
from storage import EventsOfType, StoredEvent

if TYPE_CHECKING:
    from actors import Runtime

__all__ = ["DeliveryOf", "NextEvents", "delivery_lookup"]

DeliveryOf = Callable[[str, str], Awaitable[ev.Delivery]]
"""The delivery of a session's (first argument) admitted prompt (second: its message id)."""

_MAX_STEPS: Final = 256
"""Steps one stream remembers the announced parts of (least recently seen dropped)."""
_MAX_DELIVERIES: Final = 1024
"""Admitted prompts one stream remembers the delivery of, until their promotion."""
_DELIVERY_LOOKBACK: Final = 200
"""Admissions of a session read back to find a promoted prompt's delivery."""
_PROMPTED: Final = "session.next.prompted"
"""OpenCode 1.18.33's name for a promotion (Kittiwake's ``session.next.prompt.promoted``)."""
_DIRECT: Final = frozenset(
    tag_of(t)
    for t in (
        ev.AgentSwitched, ev.ModelSwitched, ev.Moved, ev.PromptAdmitted, ev.ContextUpdated,
        ev.Synthetic, ev.StepEnded, ev.StepFailed, ev.TextEnded, ev.ReasoningEnded,
        ev.ToolInputStarted, ev.ToolInputEnded, ev.ToolCalled, ev.ToolSuccess, ev.ToolFailed,
        ev.CompactionStarted, ev.CompactionEnded,
    )
)  # fmt: skip
"""Durable types whose data is OpenCode's event properties as they are."""
_ASKS: Final = frozenset(
    tag_of(t) for t in (ev.PermissionReplied, ev.QuestionReplied, ev.QuestionRejected)
)
"""Durable types OpenCode sends without a timestamp."""


def delivery_lookup(rt: Runtime) -> DeliveryOf:
    """How a stream finds the delivery of a prompt admitted before it connected: among the
    session's last ``_DELIVERY_LOOKBACK`` admissions (``steer``, the default, past them)."""

    async def delivery(session_id: str, message_id: str) -> ev.Delivery:
        admitted = await rt.storage.read(
            EventsOfType(
                types=[tag_of(ev.PromptAdmitted)], session_id=session_id,
                limit=_DELIVERY_LOOKBACK,
            )
        )  # fmt: skip
        for stored in reversed(admitted):
            event = ev.decode_event(stored.data)
            if isinstance(event, ev.PromptAdmitted) and event.message_id == message_id:
                return event.delivery
        return "steer"

    return delivery


def _data(event: ev.DurableEvent | LiveDelta) -> dict[str, Any]:
    """The event's wire data without ``type`` and Kittiwake's own fields."""
    data: dict[str, Any] = msgspec.to_builtins(event)
    data.pop("type")
    for name in type(event).LOCAL_FIELDS:
        data.pop(ev.wire_name(name), None)
    return data


class NextEvents:
    """One V1 stream's V2 payloads: ``feed`` answers those a hub item becomes. Reads the
    session (*lookup*) when it announces a step, and the store (*delivery*) for a prompt
    it did not see admitted; raises what they raise (``SessionNotFoundError`` for a
    session deleted meanwhile), and a cancellation during a read leaves the item unsent."""

    def __init__(self, lookup: Lookup, delivery: DeliveryOf) -> None:
        self._lookup = lookup
        self._delivery_of = delivery
        self._steps: OrderedDict[str, set[str]] = OrderedDict()
        """The parts announced of each step announced, by assistant message id."""
        self._deliveries: OrderedDict[str, ev.Delivery] = OrderedDict()

    def reset(self) -> None:
        """Forget everything (after the subscription overflowed)."""
        self._steps.clear()
        self._deliveries.clear()

    async def feed(self, item: StoredEvent | LiveDelta) -> list[Payload]:
        if isinstance(item, StoredEvent):
            return await self._durable(ev.decode_event(item.data))
        return await self._live(item)

    async def _live(self, delta: LiveDelta) -> list[Payload]:
        out: list[Payload] = []
        if isinstance(delta, ev.Retried):
            data = _data(delta)
            data.pop("next")  # Kittiwake's: when the next attempt starts
            return [payload(tag_of(type(delta)), data)]
        if isinstance(delta, ev.CompactionDelta):
            return [payload(tag_of(type(delta)), _data(delta))]
        parts = await self._step(delta.session_id, delta.assistant_message_id, delta.timestamp, out)
        if isinstance(delta, ev.TextDelta | ev.ReasoningDelta):
            if isinstance(delta, ev.TextDelta):
                key, kind = delta.text_id, "session.next.text.started"
            else:
                key, kind = delta.reasoning_id, "session.next.reasoning.started"
            if key not in parts:
                parts.add(key)
                data = _data(delta)
                data.pop("delta")
                out.append(payload(kind, data))
            if delta.delta:
                out.append(payload(tag_of(type(delta)), _data(delta)))
        return out  # a tool's input and output deltas: see the module's docstring

    async def _step(self, sid: str, mid: str, now: int, out: list[Payload]) -> set[str]:
        """The parts announced of step *mid*, announcing the step when first seen."""
        parts = self._steps.get(mid)
        if parts is not None:
            self._steps.move_to_end(mid)
            return parts
        agent, model = turn_agent_model(await self._lookup.session(sid), self._lookup.default_model)
        out.append(payload("session.next.step.started", {
            "timestamp": now, "sessionID": sid, "assistantMessageID": mid, "agent": agent,
            "model": msgspec.to_builtins(model),
        }))  # fmt: skip
        return self._remember(mid)

    def _remember(self, mid: str) -> set[str]:
        """Step *mid* as announced, with no part yet (the least recently seen forgotten
        past ``_MAX_STEPS``)."""
        parts = self._steps[mid] = set()
        if len(self._steps) > _MAX_STEPS:
            self._steps.popitem(last=False)
        return parts

    async def _durable(self, e: ev.DurableEvent) -> list[Payload]:
        kind = tag_of(type(e))
        match e:
            case ev.StepStarted(assistant_message_id=mid):
                if mid in self._steps:
                    return []
                self._remember(mid)
            case (
                ev.TextStarted(assistant_message_id=mid, text_id=key)
                | ev.ReasoningStarted(assistant_message_id=mid, reasoning_id=key)
            ):
                parts = self._steps.get(mid)
                if parts is None:
                    parts = self._remember(mid)
                elif key in parts:
                    return []
                parts.add(key)
            case ev.StepEnded(assistant_message_id=mid) | ev.StepFailed(assistant_message_id=mid):
                self._steps.pop(mid, None)
            case ev.PromptAdmitted(message_id=mid, delivery=delivery):
                self._deliveries[mid] = delivery
                if len(self._deliveries) > _MAX_DELIVERIES:
                    self._deliveries.popitem(last=False)
            case ev.PromptPromoted(message_id=mid):
                if mid in self._deliveries:
                    delivery = self._deliveries.pop(mid)
                else:
                    delivery = await self._delivery_of(e.session_id, mid)
                return [payload(_PROMPTED, {
                    "timestamp": e.timestamp, "sessionID": e.session_id, "messageID": mid,
                    "prompt": msgspec.to_builtins(e.prompt), "delivery": delivery,
                })]  # fmt: skip
            case ev.PermissionAsked():
                info = ev.PermissionInfo(
                    id=e.request_id, session_id=e.session_id, agent=e.agent, tool=e.tool,
                    call_id=e.call_id, permission=e.permission, resources=e.resources,
                    time_created=e.timestamp, save=e.save, message_id=e.message_id,
                    metadata=e.metadata,
                )  # fmt: skip
                return [payload(kind, permission_json(info))]
            case ev.QuestionAsked():
                return [payload(kind, question_json(e))]
            case ev.SessionReverted(revert=revert):
                return [payload("session.next.revert.staged", {
                    "timestamp": e.timestamp, "sessionID": e.session_id,
                    "revert": msgspec.to_builtins(revert),
                })]  # fmt: skip
            case ev.SessionUnreverted():
                return [payload("session.next.revert.cleared", {
                    "timestamp": e.timestamp, "sessionID": e.session_id,
                })]  # fmt: skip
            case ev.RevertCommitted(message_ids=[first, *_]):
                return [payload("session.next.revert.committed", {
                    "timestamp": e.timestamp, "sessionID": e.session_id, "messageID": first,
                })]  # fmt: skip
        if kind in _DIRECT or isinstance(e, ev.StepStarted | ev.TextStarted | ev.ReasoningStarted):
            return [payload(kind, _data(e))]
        if kind in _ASKS:
            data = _data(e)
            data.pop("timestamp")
            return [payload(kind, data)]
        return []
