"""A session's durable events and live deltas as ACP ``session/update``s (sans-IO).

One ``Updates`` follows one stream: a prompt's (live: deltas stream as message and thought
chunks, each part's end sends what the deltas did not) or a whole history replayed by
``session/load`` (durable events only: each part's end sends it whole). A delta that
arrives after its part ended is dropped, so chunks are never sent twice whatever order
two streams deliver them in.

Besides updates it yields what the agent acts on: a permission request to put to the
client (``Ask``), a question to answer (``Question``), a model switched (``ModelChanged``).
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

import msgspec

from actors import SessionEvent
from gateway.acp._tools import ToolView, tool_view
from gateway.acp._wire import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentBlock,
    ContentToolContent,
    Cost,
    CurrentModeUpdate,
    DiffContent,
    ImageBlock,
    PermissionToolCall,
    PlanEntry,
    PlanUpdate,
    PromptUsage,
    ResourceLinkBlock,
    SessionInfoUpdate,
    SessionUpdate,
    StopReason,
    TerminalContent,
    TextBlock,
    ToolCallContent,
    ToolCallStart,
    ToolCallUpdate,
    ToolStatus,
    UsageUpdate,
    UserMessageChunk,
)
from runtime import LiveDelta, ModelRef
from runtime import events as ev

__all__ = [
    "Action",
    "Ask",
    "DEFAULT_TOOL_TEXT",
    "Delegated",
    "ModelChanged",
    "Question",
    "Updates",
    "iso",
]

DEFAULT_TOOL_TEXT: Final = 16 * 1024
"""Characters of a tool's output shown in its call (the last ones of a running command)."""
DEFAULT_DIFF_TEXT: Final = 256 * 1024
"""Bytes of a file an edit's diff shows whole (before and after)."""
_STEP_LIMIT: Final = "StepLimitExceededError"
_TASK: Final = "task"


class Ask(msgspec.Struct, frozen=True, kw_only=True):
    """A permission request to put to the client."""

    session_id: str
    request_id: str
    tool_call: PermissionToolCall


class Question(msgspec.Struct, frozen=True, kw_only=True):
    """A question the ``question`` tool (or a plan switch) asks: put to the client as
    permission requests, one per question, when each is a single choice; else dismissed."""

    session_id: str
    request_id: str
    call_id: str
    questions: list[ev.QuestionInfo]


class ModelChanged(msgspec.Struct, frozen=True, kw_only=True):
    model: ModelRef


class Delegated(msgspec.Struct, frozen=True, kw_only=True):
    """A subagent task started: its child sessions' permission requests are to be put to
    the client too."""


Action: TypeAlias = SessionUpdate | Ask | Question | ModelChanged | Delegated


class _Call:
    __slots__ = ("content", "input", "name", "output", "view")

    def __init__(self, name: str, view: ToolView, data: Any) -> None:
        self.name = name
        self.view = view
        self.input: dict[str, Any] = data if isinstance(data, dict) else {}
        self.output = ""
        self.content: list[ToolCallContent] = list(view.diffs)


def iso(ms: int) -> str:
    """Milliseconds since the epoch as ISO 8601 (UTC)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


class Updates:
    """The ACP view of one session's stream.

    Args:
        directory: the session's working directory (tool paths are relative to it).
        replay: a history replayed (prompts shown as user chunks, nothing asked) rather
            than a prompt followed live.
        context: the context window of the session's model, when known (``usage_update``
            is sent only then).
        cost: the session's cost before this stream (``usage_update`` carries the total).
        max_tool_text: characters of a tool's text output shown in its call.
        max_diff: bytes of a file an edit's diff shows whole, before and after; a larger
            file's edit shows the text it replaces only.
    """

    def __init__(
        self, directory: str, *, replay: bool = False, context: int | None = None,
        cost: float = 0.0, max_tool_text: int = DEFAULT_TOOL_TEXT,
        max_diff: int = DEFAULT_DIFF_TEXT,
    ) -> None:  # fmt: skip
        self._directory = directory
        self._replay = replay
        self.context = context
        self._cost = cost
        self._max_text = max_tool_text
        self._max_diff = max_diff
        self._calls: dict[str, _Call] = {}
        self._terminals: dict[str, str] = {}
        self._sent: dict[str, int] = {}
        self._ended: set[str] = set()
        self.finish: str | None = None
        self.failure: ev.RunError | None = None
        self.usage = ev.TokenUsage()
        self.steps = 0

    # -- the outcome ----------------------------------------------------------------------

    def stop_reason(self, cancelled: bool) -> StopReason:
        """ACP's stop reason of the prompt this stream followed."""
        if cancelled or self.finish == "interrupted":
            return "cancelled"
        if self.failure is not None and self.failure.tag == _STEP_LIMIT:
            return "max_turn_requests"
        if self.finish == "length":
            return "max_tokens"
        if self.finish == "content-filter":
            return "refusal"
        return "end_turn"

    def prompt_usage(self) -> PromptUsage | None:
        """The tokens of the steps this stream saw (``None``: no step ended)."""
        if not self.steps:
            return None
        u = self.usage
        return PromptUsage(
            total_tokens=u.input + u.output + u.reasoning + u.cache.read + u.cache.write,
            input_tokens=u.input, output_tokens=u.output, thought_tokens=u.reasoning,
            cached_read_tokens=u.cache.read, cached_write_tokens=u.cache.write,
        )  # fmt: skip

    # -- the stream -----------------------------------------------------------------------

    def feed(self, item: SessionEvent | LiveDelta) -> list[Action]:
        """What one durable event or live delta shows or asks for."""
        if isinstance(item, SessionEvent):
            return self._event(item.event)
        return self._delta(item)

    def terminal(self, call_id: str, terminal_id: str) -> list[ToolCallUpdate]:
        """The call *call_id* runs in the client's terminal *terminal_id*: its content is
        that terminal from now on (sent now if the call is shown already)."""
        self._terminals[call_id] = terminal_id
        call = self._calls.get(call_id)
        if call is None:
            return []
        call.content = [*call.view.diffs, TerminalContent(terminal_id=terminal_id)]
        return [ToolCallUpdate(tool_call_id=call_id, content=call.content)]

    def _delta(self, delta: LiveDelta) -> list[Action]:
        if isinstance(delta, ev.TextDelta):
            return self._chunk(delta.text_id, delta.delta, delta.assistant_message_id, False)
        if isinstance(delta, ev.ReasoningDelta):
            return self._chunk(delta.reasoning_id, delta.delta, delta.assistant_message_id, True)
        if isinstance(delta, ev.ToolOutputDelta):
            call = self._calls.get(delta.call_id)
            if call is None or delta.call_id in self._terminals or not delta.delta:
                return []
            call.output = _tail(call.output + delta.delta, self._max_text)
            call.content = [*call.view.diffs, _text_content(call.output)]
            return [ToolCallUpdate(tool_call_id=delta.call_id, content=call.content)]
        return []

    def _chunk(self, part: str, text: str, message_id: str, thought: bool) -> list[Action]:
        part = f"{message_id}/{part}"  # a provider numbers the parts of each step afresh
        if part in self._ended or not text:
            return []
        self._sent[part] = self._sent.get(part, 0) + len(text)
        kind = AgentThoughtChunk if thought else AgentMessageChunk
        return [kind(content=TextBlock(text=text), message_id=message_id)]

    def _ended_part(self, part: str, text: str, message_id: str, thought: bool) -> list[Action]:
        """A part's end: what its deltas did not send (all of it in a replay)."""
        part = f"{message_id}/{part}"
        if part in self._ended:
            return []
        self._ended.add(part)
        rest = text[self._sent.pop(part, 0) :]
        if not rest:
            return []
        kind = AgentThoughtChunk if thought else AgentMessageChunk
        return [kind(content=TextBlock(text=rest), message_id=message_id)]

    def _event(self, event: ev.DurableEvent) -> list[Action]:
        match event:
            case ev.TextEnded():
                return self._ended_part(
                    event.text_id, event.text, event.assistant_message_id, False
                )
            case ev.ReasoningEnded():
                return self._ended_part(
                    event.reasoning_id, event.text, event.assistant_message_id, True
                )
            case ev.ToolInputStarted():
                return self._start(event.call_id, event.name, {}, "pending")
            case ev.ToolCalled():
                shown = self._start(event.call_id, event.tool, event.input, "in_progress")
                if event.tool == _TASK and not self._replay:
                    return [*shown, Delegated()]
                return shown
            case ev.ToolSuccess() | ev.ToolFailed():
                return self._settled(event)
            case ev.FileBeforeImage():
                return self._whole_file(event)
            case ev.TodoUpdated():
                return [PlanUpdate(entries=[_plan_entry(todo) for todo in event.todos])]
            case ev.PermissionAsked() if not self._replay:
                return [self._ask(event)]
            case ev.QuestionAsked() if not self._replay:
                tool = event.tool
                call_id = tool.call_id if isinstance(tool, ev.QuestionTool) else event.id
                return [
                    Question(
                        session_id=event.session_id, request_id=event.id, call_id=call_id,
                        questions=event.questions,
                    )
                ]  # fmt: skip
            case ev.PromptPromoted() if self._replay:
                return _user_chunks(event.prompt, event.message_id)
            case ev.AgentSwitched():
                return [CurrentModeUpdate(current_mode_id=event.agent)]
            case ev.ModelSwitched():
                return [ModelChanged(model=event.model)]
            case ev.SessionUpdated():
                info = event.info
                return [SessionInfoUpdate(title=info.title, updated_at=iso(info.time.updated))]
            case ev.StepStarted():
                self.failure = None
                return []
            case ev.StepEnded():
                return self._step_ended(event)
            case ev.StepFailed():
                self.failure = ev.RunError(tag="ProviderError", message=event.error.message)
                return []
            case ev.RunFailed():
                self.failure = event.error
                return []
        return []

    def _start(self, call_id: str, name: str, data: Any, status: ToolStatus) -> list[Action]:
        view = tool_view(name, data, self._directory)
        known = self._calls.get(call_id)
        call = _Call(name, view, data)
        if known is not None:
            call.output = known.output
        self._calls[call_id] = call
        if call_id in self._terminals:
            call.content = [*view.diffs, TerminalContent(terminal_id=self._terminals[call_id])]
        content = call.content or None
        raw = data if data else None
        if known is None:
            return [
                ToolCallStart(
                    tool_call_id=call_id, title=view.title, kind=view.kind, status=status,
                    content=content, locations=view.locations or None, raw_input=raw,
                )
            ]  # fmt: skip
        return [
            ToolCallUpdate(
                tool_call_id=call_id, title=view.title, kind=view.kind, status=status,
                content=content, locations=view.locations or None, raw_input=raw,
            )
        ]  # fmt: skip

    def _settled(self, event: ev.ToolSuccess | ev.ToolFailed) -> list[Action]:
        call = self._calls.get(event.call_id)
        if call is None:  # a settlement whose call this stream did not show (a fork's)
            call = _Call("", tool_view("", {}, self._directory), {})
            self._calls[event.call_id] = call
            start: list[Action] = [ToolCallStart(tool_call_id=event.call_id, title="tool")]
        else:
            start = []
        if isinstance(event, ev.ToolFailed):
            content = [*call.view.diffs, _text_content(event.error.message)]
            update = ToolCallUpdate(tool_call_id=event.call_id, status="failed", content=content)
            return [*start, update]
        content = list(call.view.diffs)
        if event.call_id in self._terminals:
            content.append(TerminalContent(terminal_id=self._terminals[event.call_id]))
        elif not call.view.diffs:
            text = "".join(c.text for c in event.content if isinstance(c, ev.ToolTextContent))
            if text:
                content.append(_text_content(_head(text, self._max_text)))
        raw = event.structured or None
        update = ToolCallUpdate(
            tool_call_id=event.call_id, status="completed", content=content or None,
            raw_output=raw,
        )  # fmt: skip
        return [*start, update]

    def _whole_file(self, event: ev.FileBeforeImage) -> list[Action]:
        """An ``edit`` or ``write`` shown as a diff of the whole file, once the file's
        content before it is recorded (in process: attached, the server sends its path
        alone and the call keeps the diff of the text it replaces)."""
        call = self._calls.get(event.call_id)
        if call is None or call.name not in ("edit", "write") or len(event.files) != 1:
            return []
        image = event.files[0]
        if image.omitted or len(image.content or b"") > self._max_diff:
            return []
        before = image.content.decode("utf-8", "replace") if image.content is not None else None
        given = call.input
        if call.name == "write" and isinstance(given.get("content"), str):
            after: str = given["content"]
        elif call.name == "edit" and before is not None:
            old, new = given.get("oldString"), given.get("newString")
            if not isinstance(old, str) or not isinstance(new, str) or old not in before:
                return []
            after = before.replace(old, new, -1 if given.get("replaceAll") is True else 1)
        else:
            return []
        if len(after) > self._max_diff:
            return []
        diff = DiffContent(path=image.path, old_text=before, new_text=after)
        call.view.diffs = [diff]
        call.content = [diff]
        return [ToolCallUpdate(tool_call_id=event.call_id, content=call.content)]

    def _ask(self, event: ev.PermissionAsked) -> Ask:
        call = self._calls.get(event.call_id) if event.tool else None
        if call is None:  # a client's own request, or a call this stream did not show
            title = f"{event.permission} {', '.join(event.resources)}".strip()
            tool_call = PermissionToolCall(
                tool_call_id=event.call_id or event.request_id, title=title, status="pending"
            )
        else:
            view = call.view
            tool_call = PermissionToolCall(
                tool_call_id=event.call_id, title=view.title, kind=view.kind, status="pending",
                content=list(view.diffs) or None, locations=view.locations or None,
            )  # fmt: skip
        return Ask(session_id=event.session_id, request_id=event.request_id, tool_call=tool_call)

    def _step_ended(self, event: ev.StepEnded) -> list[Action]:
        self.finish = event.finish
        self.steps += 1
        t, total = event.tokens, self.usage
        self.usage = ev.TokenUsage(
            input=total.input + t.input, output=total.output + t.output,
            reasoning=total.reasoning + t.reasoning,
            cache=ev.TokenCache(
                read=total.cache.read + t.cache.read, write=total.cache.write + t.cache.write
            ),
        )  # fmt: skip
        self._cost += event.cost
        if self.context is None:
            return []
        used = t.input + t.cache.read + t.cache.write + t.output
        cost = Cost(amount=self._cost, currency="USD")
        return [UsageUpdate(used=used, size=self.context, cost=cost)]


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_content(text: str) -> ContentToolContent:
    return ContentToolContent(content=TextBlock(text=text))


def _plan_entry(todo: ev.Todo) -> PlanEntry:
    status = "completed" if todo.status == "cancelled" else todo.status
    return PlanEntry(content=todo.content, priority=todo.priority, status=status)


def _user_chunks(prompt: ev.Prompt, message_id: str) -> list[Action]:
    """A prompt as the user's chunks: its text, then its attachments (images inline)."""
    blocks: list[ContentBlock] = [TextBlock(text=prompt.text)] if prompt.text else []
    for attached in prompt.files:
        image = _data_image(attached.uri, attached.mime)
        if image is not None:
            blocks.append(image)
        else:
            name = attached.name if isinstance(attached.name, str) else attached.uri
            blocks.append(ResourceLinkBlock(uri=attached.uri, name=name, mime_type=attached.mime))
    return [UserMessageChunk(content=block, message_id=message_id) for block in blocks]


def _data_image(uri: str, mime: str) -> ImageBlock | None:
    """An image attached as a ``data:`` URL (as ACP's image blocks arrive)."""
    if not mime.startswith("image/") or not uri.startswith("data:"):
        return None
    head, _, data = uri.partition(",")
    if not head.endswith(";base64"):
        return None
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error:
        return None
    return ImageBlock(data=data, mime_type=mime)
