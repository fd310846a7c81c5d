"""The projector: how each durable event changes the session, inbox and message views.

Pure: it reads and writes through a :class:`ProjectionState`, which the store
backs with its tables inside the event's own transaction. Replaying the event
log through it into an empty store rebuilds identical projections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from msgspec import UNSET
from msgspec.structs import replace

from runtime import events as ev
from runtime._messages import (
    AgentSwitchedMessage,
    AssistantContent,
    AssistantMessage,
    AssistantReasoning,
    AssistantText,
    AssistantTool,
    CompactionMessage,
    CompactionMetadata,
    MessageTime,
    ModelSwitchedMessage,
    SessionMessage,
    SyntheticMessage,
    SystemMessage,
    ToolCompleted,
    ToolError,
    ToolPending,
    ToolProviderInfo,
    ToolRunning,
    ToolTime,
    UserMessage,
)
from runtime.revert import HIDDEN_OPEN, close_hidden, hidden_ranges, open_hidden

__all__ = ["ProjectionError", "ProjectionState", "project"]


class ProjectionError(Exception):
    """An event that cannot apply to the current projection (a defect, not bad input)."""


class ProjectionState(Protocol):
    """Read and write access to the projections, inside one transaction."""

    def session(self, session_id: str) -> ev.SessionInfo: ...
    def put_session(self, info: ev.SessionInfo) -> None: ...
    def put_input(self, row: ev.InputAdmitted) -> None: ...
    def promote_input(self, session_id: str, message_id: str, seq: int) -> None: ...
    def message(self, session_id: str, message_id: str) -> SessionMessage | None: ...
    def put_message(self, session_id: str, seq: int, message: SessionMessage) -> None: ...
    def clear_epoch(self, session_id: str) -> None: ...
    def permission(self, request_id: str) -> ev.PermissionInfo | None: ...
    def put_permission(self, info: ev.PermissionInfo) -> None: ...
    def drop_session(self, session_id: str) -> None: ...


def project(event: ev.DurableEvent, seq: int, state: ProjectionState) -> None:
    """Apply one durable event at *seq*.

    Raises:
        ProjectionError: the event contradicts the projection (unknown message).
    """
    handler = _HANDLERS.get(type(event))
    if handler is not None:
        handler(event, seq, state)


def _created(e: Any, seq: int, state: ProjectionState) -> None:
    state.put_session(e.info)


def _deleted(e: Any, seq: int, state: ProjectionState) -> None:
    state.drop_session(e.session_id)


def _updated(e: Any, seq: int, state: ProjectionState) -> None:
    _touch_session(state, e, title=e.info.title, share=e.info.share)


def _admitted(e: Any, seq: int, state: ProjectionState) -> None:
    row = ev.InputAdmitted(
        admitted_seq=seq,
        id=e.message_id,
        session_id=e.session_id,
        prompt=e.prompt,
        delivery=e.delivery,
        time_created=e.timestamp,
    )
    state.put_input(row)


def _promoted(e: Any, seq: int, state: ProjectionState) -> None:
    state.promote_input(e.session_id, e.message_id, seq)
    p = e.prompt
    msg = UserMessage(
        id=e.message_id, time=MessageTime(created=e.time_created), text=p.text,
        files=p.files, agents=p.agents,
    )  # fmt: skip
    state.put_message(e.session_id, seq, msg)


def _agent_switched(e: Any, seq: int, state: ProjectionState) -> None:
    _touch_session(state, e, agent=e.agent)
    msg = AgentSwitchedMessage(
        id=e.message_id, time=MessageTime(created=e.timestamp), agent=e.agent
    )
    state.put_message(e.session_id, seq, msg)


def _model_switched(e: Any, seq: int, state: ProjectionState) -> None:
    _touch_session(state, e, model=e.model)
    msg = ModelSwitchedMessage(
        id=e.message_id, time=MessageTime(created=e.timestamp), model=e.model
    )
    state.put_message(e.session_id, seq, msg)


def _moved(e: Any, seq: int, state: ProjectionState) -> None:
    _touch_session(state, e, location=e.location)
    state.clear_epoch(e.session_id)


def _context_updated(e: Any, seq: int, state: ProjectionState) -> None:
    msg = SystemMessage(id=e.message_id, time=MessageTime(created=e.timestamp), text=e.text)
    state.put_message(e.session_id, seq, msg)


def _synthetic(e: Any, seq: int, state: ProjectionState) -> None:
    msg = SyntheticMessage(
        id=e.message_id, time=MessageTime(created=e.timestamp), session_id=e.session_id, text=e.text
    )
    state.put_message(e.session_id, seq, msg)


def _compaction_ended(e: Any, seq: int, state: ProjectionState) -> None:
    msg = CompactionMessage(
        id=e.message_id, time=MessageTime(created=e.timestamp), reason=e.reason,
        summary=e.text, recent=e.recent, metadata=CompactionMetadata(boundary_seq=e.boundary_seq),
    )  # fmt: skip
    state.put_message(e.session_id, seq, msg)


def _results_pruned(e: Any, seq: int, state: ProjectionState) -> None:
    for message_id, call_id in e.calls:
        message = state.message(e.session_id, message_id)
        index = _find(message, call_id) if isinstance(message, AssistantMessage) else None
        if message is None or index is None:
            continue  # the call is gone: nothing left to prune
        assert isinstance(message, AssistantMessage)
        tool = message.content[index]
        if isinstance(tool, AssistantTool):
            content = list(message.content)
            content[index] = replace(tool, time=replace(tool.time, pruned=e.timestamp))
            state.put_message(e.session_id, -1, replace(message, content=content))


def _step_started(e: Any, seq: int, state: ProjectionState) -> None:
    msg = AssistantMessage(
        id=e.assistant_message_id, time=MessageTime(created=e.timestamp), agent=e.agent,
        model=e.model,
    )  # fmt: skip
    state.put_message(e.session_id, seq, msg)
    info = state.session(e.session_id)
    if info.needs_resume or info.last_error is not UNSET:  # a new provider turn runs
        _touch_session(state, e, needs_resume=UNSET, last_error=UNSET)


def _mcp_tools_found(e: Any, seq: int, state: ProjectionState) -> None:
    info = state.session(e.session_id)
    known = info.mcp_tools if isinstance(info.mcp_tools, list) else []
    state.put_session(replace(info, mcp_tools=sorted({*known, *e.tools})))


def _resume_needed(e: Any, seq: int, state: ProjectionState) -> None:
    _touch_session(state, e, needs_resume=True)


def _run_failed(e: Any, seq: int, state: ProjectionState) -> None:
    _touch_session(state, e, last_error=e.error)


def _step_ended(e: Any, seq: int, state: ProjectionState) -> None:
    def change(m: AssistantMessage) -> AssistantMessage:
        time = replace(m.time, completed=e.timestamp)
        return replace(m, finish=e.finish, cost=e.cost, tokens=e.tokens, time=time)

    _update_assistant(state, e, change)
    info = state.session(e.session_id)
    tokens = _add_tokens(info.tokens, e.tokens)
    _touch_session(state, e, cost=info.cost + e.cost, tokens=tokens)


def _step_failed(e: Any, seq: int, state: ProjectionState) -> None:
    def change(m: AssistantMessage) -> AssistantMessage:
        return replace(m, error=e.error, time=replace(m.time, completed=e.timestamp))

    _update_assistant(state, e, change)


def _text_started(e: Any, seq: int, state: ProjectionState) -> None:
    _append_content(state, e, AssistantText(id=e.text_id, text=""))


def _text_ended(e: Any, seq: int, state: ProjectionState) -> None:
    _replace_content(state, e, e.text_id, lambda c: replace(c, text=e.text))


def _reasoning_started(e: Any, seq: int, state: ProjectionState) -> None:
    part = AssistantReasoning(id=e.reasoning_id, text="", provider_metadata=e.provider_metadata)
    _append_content(state, e, part)


def _reasoning_ended(e: Any, seq: int, state: ProjectionState) -> None:
    def change(c: Any) -> Any:
        meta = c.provider_metadata if e.provider_metadata is UNSET else e.provider_metadata
        return replace(c, text=e.text, provider_metadata=meta)

    _replace_content(state, e, e.reasoning_id, change)


def _tool_input_started(e: Any, seq: int, state: ProjectionState) -> None:
    tool = AssistantTool(
        id=e.call_id, name=e.name, state=ToolPending(input=""), time=ToolTime(created=e.timestamp)
    )
    _append_content(state, e, tool)


def _tool_input_ended(e: Any, seq: int, state: ProjectionState) -> None:
    _replace_content(state, e, e.call_id, lambda c: replace(c, state=ToolPending(input=e.text)))


def _tool_called(e: Any, seq: int, state: ProjectionState) -> None:
    running = ToolRunning(input=e.input)
    provider = ToolProviderInfo(executed=e.provider.executed, metadata=e.provider.metadata)
    message = _assistant(state, e)
    if _find(message, e.call_id) is None:
        tool = AssistantTool(
            id=e.call_id, name=e.tool, state=running, provider=provider,
            time=ToolTime(created=e.timestamp, ran=e.timestamp),
        )  # fmt: skip
        _append_content(state, e, tool)
        return
    time_ran = lambda c: replace(c.time, ran=e.timestamp)  # noqa: E731
    change = lambda c: replace(c, state=running, provider=provider, time=time_ran(c))  # noqa: E731
    _replace_content(state, e, e.call_id, change)


def _tool_success(e: Any, seq: int, state: ProjectionState) -> None:
    def change(c: AssistantTool) -> AssistantTool:
        done = ToolCompleted(
            input=_tool_input(c), content=e.content, structured=e.structured,
            output_paths=e.output_paths, result=e.result,
        )  # fmt: skip
        return replace(c, state=done, time=replace(c.time, completed=e.timestamp))

    _replace_content(state, e, e.call_id, change)


def _tool_failed(e: Any, seq: int, state: ProjectionState) -> None:
    def change(c: AssistantTool) -> AssistantTool:
        content = getattr(c.state, "content", [])
        structured = getattr(c.state, "structured", {})
        failed = ToolError(
            input=_tool_input(c), content=content, structured=structured, error=e.error,
            result=e.result,
        )  # fmt: skip
        return replace(c, state=failed, time=replace(c.time, completed=e.timestamp))

    _replace_content(state, e, e.call_id, change)


def _reverted(e: Any, seq: int, state: ProjectionState) -> None:
    info = state.session(e.session_id)
    hidden = open_hidden(hidden_ranges(info), e.hidden_from)
    _touch_session(state, e, revert=e.revert, hidden=hidden)


def _unreverted(e: Any, seq: int, state: ProjectionState) -> None:
    _close_revert(state, e, None)


def _revert_ended(e: Any, seq: int, state: ProjectionState) -> None:
    """A revert committed, or a prompt admitted while one stands: its messages go for good."""
    info = state.session(e.session_id)
    if info.revert is not UNSET or any(end == HIDDEN_OPEN for _, end in hidden_ranges(info)):
        _close_revert(state, e, seq)


def _close_revert(state: ProjectionState, e: Any, end: int | None) -> None:
    hidden = close_hidden(hidden_ranges(state.session(e.session_id)), end)
    _touch_session(state, e, revert=UNSET, hidden=hidden or UNSET)


def _admitted_after_revert(e: Any, seq: int, state: ProjectionState) -> None:
    _admitted(e, seq, state)
    _revert_ended(e, seq, state)


def _permission_asked(e: Any, seq: int, state: ProjectionState) -> None:
    info = ev.PermissionInfo(
        id=e.request_id, session_id=e.session_id, agent=e.agent, tool=e.tool, call_id=e.call_id,
        permission=e.permission, resources=e.resources, time_created=e.timestamp, save=e.save,
        message_id=e.message_id, metadata=e.metadata,
    )  # fmt: skip
    state.put_permission(info)


def _permission_replied(e: Any, seq: int, state: ProjectionState) -> None:
    info = state.permission(e.request_id)
    if info is None:
        raise ProjectionError(f"Unknown permission request: {e.request_id}")
    state.put_permission(replace(info, status=e.reply))


# -- helpers ---------------------------------------------------------------------------------


def _tool_input(tool: AssistantTool) -> dict[str, Any]:
    value = tool.state.input
    return value if isinstance(value, dict) else {}


def _touch_session(state: ProjectionState, e: Any, **changes: Any) -> None:
    info = state.session(e.session_id)
    time = replace(info.time, updated=e.timestamp)
    state.put_session(replace(info, time=time, **changes))


def _add_tokens(a: ev.TokenUsage, b: ev.TokenUsage) -> ev.TokenUsage:
    cache = ev.TokenCache(read=a.cache.read + b.cache.read, write=a.cache.write + b.cache.write)
    return ev.TokenUsage(
        input=a.input + b.input, output=a.output + b.output,
        reasoning=a.reasoning + b.reasoning, cache=cache,
    )  # fmt: skip


def _assistant(state: ProjectionState, e: Any) -> AssistantMessage:
    message = state.message(e.session_id, e.assistant_message_id)
    if not isinstance(message, AssistantMessage):
        raise ProjectionError(f"Unknown assistant message: {e.assistant_message_id}")
    return message


def _update_assistant(
    state: ProjectionState, e: Any, change: Callable[[AssistantMessage], AssistantMessage]
) -> None:
    message = _assistant(state, e)
    state.put_message(e.session_id, -1, change(message))


def _find(message: AssistantMessage, part_id: str) -> int | None:
    for index in range(len(message.content) - 1, -1, -1):
        if message.content[index].id == part_id:
            return index
    return None


def _append_content(state: ProjectionState, e: Any, part: AssistantContent) -> None:
    _update_assistant(state, e, lambda m: replace(m, content=[*m.content, part]))


def _replace_content(
    state: ProjectionState, e: Any, part_id: str, change: Callable[[Any], Any]
) -> None:
    message = _assistant(state, e)
    index = _find(message, part_id)
    if index is None:
        raise ProjectionError(f"Unknown content {part_id} in {message.id}")
    content = list(message.content)
    content[index] = change(content[index])
    state.put_message(e.session_id, -1, replace(message, content=content))


_HANDLERS: dict[type, Callable[[Any, int, ProjectionState], None]] = {
    ev.SessionCreated: _created,
    ev.SessionDeleted: _deleted,
    ev.SessionUpdated: _updated,
    ev.PromptAdmitted: _admitted_after_revert,
    ev.PromptPromoted: _promoted,
    ev.AgentSwitched: _agent_switched,
    ev.ModelSwitched: _model_switched,
    ev.Moved: _moved,
    ev.ContextUpdated: _context_updated,
    ev.Synthetic: _synthetic,
    ev.ResumeNeeded: _resume_needed,
    ev.McpToolsFound: _mcp_tools_found,
    ev.RunFailed: _run_failed,
    ev.StepStarted: _step_started,
    ev.StepEnded: _step_ended,
    ev.StepFailed: _step_failed,
    ev.TextStarted: _text_started,
    ev.TextEnded: _text_ended,
    ev.ReasoningStarted: _reasoning_started,
    ev.ReasoningEnded: _reasoning_ended,
    ev.ToolInputStarted: _tool_input_started,
    ev.ToolInputEnded: _tool_input_ended,
    ev.ToolCalled: _tool_called,
    ev.ToolSuccess: _tool_success,
    ev.ToolFailed: _tool_failed,
    ev.PermissionAsked: _permission_asked,
    ev.PermissionReplied: _permission_replied,
    ev.CompactionEnded: _compaction_ended,
    ev.ToolResultsPruned: _results_pruned,
    ev.SessionReverted: _reverted,
    ev.SessionUnreverted: _unreverted,
    ev.RevertCommitted: _revert_ended,
}
