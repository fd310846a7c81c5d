"""The assistant messages being written, as OpenCode's V1 routes list them, and the one
numbering of their parts.

``LiveAnswers`` is one per served gateway. The event hub calls ``feed`` with every durable
event and live delta before any subscriber sees it (``EventHub.add_observer``), so what it
holds is never behind a V1 stream. It does two things:

- It numbers each assistant message's parts: a part's index is the order in which its
  content item (text, reasoning or call id; ``step-finish`` last) was first published, the
  order the store keeps the message's content in. Every V1 stream's projection
  (``gateway.opencode._v1_events.V1Projection``) asks it, so a part has one id everywhere
  (``gateway.http._opencode.part_id``).
- It holds each busy session's assistant message in progress (its parts and the text
  streamed so far), which ``GET /session/{id}/message`` adds to what the store holds
  (``live_items``): OpenCode's UI, opening a session while its answer streams, replaces what
  it drew from the events with that list, and the next deltas then land on the same ids.

A held message is dropped when its step's end (``step.ended``, ``step.failed``) is
published, when the session's run fails, is deleted, or is idle (``idle``). Nothing here
does I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from gateway.http import assistant_json, content_json
from runtime import LiveDelta, ModelRef, SessionInfo
from runtime import events as ev
from runtime import messages as msg
from storage import StoredEvent

__all__ = ["LiveAnswer", "LiveAnswers", "live_items", "tag_of"]

_CHUNKS: Final = 256
"""Deltas a held part keeps apart before joining them (many small strings cost more)."""
_FINISH: Final = "step-finish"
"""The key of a message's step-finish part: numbered after its content."""


def tag_of(kind: type[msgspec.Struct]) -> str:
    """The wire type of an event class (its msgspec tag)."""
    return str(kind.__struct_config__.tag)


_DURABLE: Final = {
    tag_of(kind): kind
    for kind in (
        ev.StepStarted, ev.TextStarted, ev.TextEnded, ev.ReasoningStarted, ev.ReasoningEnded,
        ev.ToolInputStarted, ev.ToolInputEnded, ev.ToolCalled, ev.ToolSuccess, ev.ToolFailed,
        ev.StepEnded, ev.StepFailed, ev.RunFailed, ev.SessionDeleted,
    )
}  # fmt: skip
"""The durable events that change what is held (the others are not decoded)."""


@dataclass
class _Part:
    kind: Literal["text", "reasoning", "tool"]
    index: int
    started: int
    chunks: list[str] = field(default_factory=list)
    size: int = 0
    """Characters in ``chunks``."""
    ended: int | None = None
    tool: msg.AssistantTool | None = None
    """A tool call's state, once a durable event named its tool."""


@dataclass
class _Held:
    session_id: str
    message_id: str
    created: int
    parts: dict[str, _Part] = field(default_factory=dict)
    """Part by content item id, in creation order."""


class LiveAnswer(msgspec.Struct, frozen=True):
    """A copy of one held message: its content so far as ``(index, started, ended, item)``,
    in creation order."""

    message_id: str
    created: int
    parts: tuple[tuple[int, int, int | None, msg.AssistantContent], ...]


class LiveAnswers:
    """The part numbers of recent assistant messages and the messages being written.

    Args:
        max_sessions: sessions whose message in progress is held; past it, the one changed
            least recently is dropped (the list leaves it out until its step's end is
            stored; its part numbers are kept).
        max_parts: parts held per message; later ones are numbered, not held (the list
            shows the first *max_parts* until the step's end is stored).
        max_text: characters held per text or reasoning part; the held text stops there
            (the list shows that much until the step's end is stored).
        max_numbered: messages whose part numbers are kept (least recently used dropped);
            a stream that has not yet caught up with a message reads them here.
    """

    def __init__(
        self, *, max_sessions: int = 256, max_parts: int = 1024, max_text: int = 1_000_000,
        max_numbered: int = 1024,
    ) -> None:  # fmt: skip
        if min(max_sessions, max_parts, max_text, max_numbered) < 1:
            raise ValueError("LiveAnswers bounds must be positive")
        self.max_sessions = max_sessions
        self.max_parts = max_parts
        self.max_text = max_text
        self.max_numbered = max_numbered
        self._numbers: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._held: OrderedDict[str, _Held] = OrderedDict()
        """The message in progress by session id, least recently changed first."""

    # -- numbering ------------------------------------------------------------------------

    def knows(self, message_id: str) -> bool:
        """Whether the parts of *message_id* are numbered here."""
        return message_id in self._numbers

    def seed(self, message_id: str, keys: Sequence[str]) -> None:
        """Number the parts of a stored message nobody numbered here yet (its content item
        ids, in stored order) from 1; no-op for a message already numbered."""
        if message_id not in self._numbers:
            self._remember(message_id, {key: n for n, key in enumerate(keys, start=1)})

    def index(self, message_id: str, key: str) -> int:
        """The index of part *key* of *message_id* (content from 1; ``step-finish`` after
        its content): given the first time the part is seen."""
        numbers = self._numbers.get(message_id)
        if numbers is None:
            numbers = self._remember(message_id, {})
        else:
            self._numbers.move_to_end(message_id)
        if key not in numbers:
            numbers[key] = len(numbers) + 1
        return numbers[key]

    def _remember(self, message_id: str, numbers: dict[str, int]) -> dict[str, int]:
        self._numbers[message_id] = numbers
        while len(self._numbers) > self.max_numbered:
            self._numbers.popitem(last=False)
        return numbers

    # -- the messages in progress ---------------------------------------------------------

    def held(self, session_id: str) -> LiveAnswer | None:
        """A copy of *session_id*'s message in progress, if one is held."""
        held = self._held.get(session_id)
        if held is None:
            return None
        parts: list[tuple[int, int, int | None, msg.AssistantContent]] = []
        for key, part in held.parts.items():
            item: msg.AssistantContent
            if part.kind == "tool":
                if part.tool is None:
                    continue  # its tool is not named yet: the streams have not shown it
                item = part.tool
            elif part.kind == "text":
                item = msg.AssistantText(id=key, text="".join(part.chunks))
            else:
                item = msg.AssistantReasoning(id=key, text="".join(part.chunks))
            parts.append((part.index, part.started, part.ended, item))
        return LiveAnswer(message_id=held.message_id, created=held.created, parts=tuple(parts))

    def idle(self, session_id: str) -> None:
        """The session is idle: drop its message in progress."""
        self._held.pop(session_id, None)

    def feed(self, item: StoredEvent | LiveDelta) -> None:
        """Fold one hub item in (the hub's observer). Never blocks; decodes only the
        durable events that change what is held."""
        if isinstance(item, StoredEvent):
            kind = _DURABLE.get(item.type)
            if kind is not None:
                self._durable(ev.decode_event(item.data))
            return
        if isinstance(item, ev.TextDelta):
            self._grow(item, item.text_id, "text", item.delta)
        elif isinstance(item, ev.ReasoningDelta):
            self._grow(item, item.reasoning_id, "reasoning", item.delta)
        elif isinstance(item, ev.ToolInputDelta):
            self._part(item, item.call_id, "tool", live=True)

    def _message(self, session_id: str, message_id: str, now: int) -> _Held:
        held = self._held.get(session_id)
        if held is None or held.message_id != message_id:
            held = _Held(session_id, message_id, now)  # a newer step replaces an older one
            self._held[session_id] = held
            while len(self._held) > self.max_sessions:
                self._held.popitem(last=False)
        self._held.move_to_end(session_id)
        return held

    def _part(
        self, e: Any, key: str, kind: Literal["text", "reasoning", "tool"], *, live: bool = False
    ) -> _Part | None:
        """Part *key* of *e*'s message, numbered, and held when its message is (a *live*
        delta starts holding it); ``None`` when not held or past ``max_parts``."""
        index = self.index(e.assistant_message_id, key)
        held = self._held.get(e.session_id)
        if live or (held is not None and held.message_id == e.assistant_message_id):
            held = self._message(e.session_id, e.assistant_message_id, e.timestamp)
        else:
            return None  # its step ended (a call settling after it): the store holds it
        part = held.parts.get(key)
        if part is None and len(held.parts) < self.max_parts:
            part = held.parts[key] = _Part(kind, index, e.timestamp)
        return part

    def _grow(self, e: Any, key: str, kind: Literal["text", "reasoning"], delta: str) -> None:
        part = self._part(e, key, kind, live=True)
        if part is not None and delta and part.size < self.max_text:
            kept = delta[: self.max_text - part.size]
            part.chunks.append(kept)
            part.size += len(kept)
            if len(part.chunks) > _CHUNKS:
                part.chunks = ["".join(part.chunks)]

    def _durable(self, e: ev.DurableEvent) -> None:
        match e:
            case ev.StepEnded() | ev.StepFailed():
                if isinstance(e, ev.StepEnded):
                    self.index(e.assistant_message_id, _FINISH)
                held = self._held.get(e.session_id)
                if held is not None and held.message_id == e.assistant_message_id:
                    del self._held[e.session_id]
            case ev.RunFailed() | ev.SessionDeleted():
                self._held.pop(e.session_id, None)
            case ev.StepStarted():
                self._message(e.session_id, e.assistant_message_id, e.timestamp)
            case ev.TextStarted() | ev.TextEnded():
                self._text(e, e.text_id, "text", e.text if isinstance(e, ev.TextEnded) else None)
            case ev.ReasoningStarted() | ev.ReasoningEnded():
                text = e.text if isinstance(e, ev.ReasoningEnded) else None
                self._text(e, e.reasoning_id, "reasoning", text)
            case ev.ToolInputStarted() | ev.ToolInputEnded() | ev.ToolCalled():
                self._tool(e)
            case ev.ToolSuccess() | ev.ToolFailed():
                self._tool(e)
            case _:
                pass

    def _text(self, e: Any, key: str, kind: Literal["text", "reasoning"], text: str | None) -> None:
        part = self._part(e, key, kind)
        if part is not None and text is not None:
            kept = text[: self.max_text]
            part.chunks, part.size, part.ended = [kept], len(kept), e.timestamp

    def _tool(self, e: Any) -> None:
        part = self._part(e, e.call_id, "tool")
        if part is None:
            return
        tool = part.tool
        if isinstance(e, ev.ToolInputStarted):
            part.tool = msg.AssistantTool(
                id=e.call_id, name=e.name, state=msg.ToolPending(input=""),
                time=msg.ToolTime(created=e.timestamp),
            )  # fmt: skip
        elif isinstance(e, ev.ToolInputEnded) and tool is not None:
            part.tool = msgspec.structs.replace(tool, state=msg.ToolPending(input=e.text))
        elif isinstance(e, ev.ToolCalled):
            created = tool.time.created if tool is not None else e.timestamp
            part.tool = msg.AssistantTool(
                id=e.call_id, name=e.tool, state=msg.ToolRunning(input=e.input),
                time=msg.ToolTime(created=created, ran=e.timestamp),
            )  # fmt: skip
        elif isinstance(e, ev.ToolSuccess | ev.ToolFailed) and tool is not None:
            state = tool.state
            given = state.input if isinstance(state, msg.ToolRunning) else {}
            done: msg.ToolState = (
                msg.ToolCompleted(input=given, content=e.content, structured=e.structured)
                if isinstance(e, ev.ToolSuccess)
                else msg.ToolError(input=given, content=[], structured={}, error=e.error)
            )
            time = msgspec.structs.replace(tool.time, completed=e.timestamp)
            part.tool = msgspec.structs.replace(tool, state=done, time=time)


def live_items(
    items: list[dict[str, Any]], live: LiveAnswer | None, info: SessionInfo, fallback_model: Any
) -> list[dict[str, Any]]:
    """*items* (a session's stored messages as ``{info, parts}``) with the message in
    progress *live*: appended when the store does not hold it; else the stored message
    with the parts the store does not hold yet, and the streamed text of those it holds
    unended. Part ids sort in creation order."""
    if live is None:
        return items
    base = {"sessionID": info.id, "messageID": live.message_id}
    parts = {
        part_json["id"]: part_json
        for index, started, ended, item in live.parts
        for part_json in (content_json(item, base, index, started, ended, info.location.directory),)
    }
    for n, stored in enumerate(items):
        if stored["info"]["id"] != live.message_id:
            continue
        merged = {p["id"]: p for p in stored["parts"]}
        for pid, part in parts.items():
            mine = merged.get(pid)
            if mine is None or (
                mine["type"] in ("text", "reasoning") and "end" not in mine.get("time", {})
            ):
                merged[pid] = part
        items = list(items)
        items[n] = {"info": stored["info"], "parts": [merged[k] for k in sorted(merged)]}
        return items
    model = info.model if isinstance(info.model, ModelRef) else fallback_model
    agent = info.agent if isinstance(info.agent, str) else "build"
    message = msg.AssistantMessage(
        id=live.message_id, time=msg.MessageTime(created=live.created), agent=agent, model=model
    )
    users = [i["info"]["id"] for i in items if i["info"]["role"] == "user"]
    item = assistant_json(message, info, users[-1] if users else live.message_id)
    item["parts"] += [parts[k] for k in sorted(parts)]
    return [*items, item]
