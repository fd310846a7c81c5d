"""Lowering: projected Session History -> the LLM package's provider-neutral messages."""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import UNSET

from runtime import _messages as m
from runtime import llm
from runtime._schema import ModelRef, ToolContent, ToolFileContent

__all__ = ["lower_history", "lower_message", "to_llm_model"]


def to_llm_model(model: ModelRef) -> llm.ModelRef:
    variant = None if model.variant is UNSET else model.variant
    return llm.ModelRef(provider_id=model.provider_id, model_id=model.id, variant=variant)


def lower_history(history: Iterable[m.SessionMessage], model: ModelRef) -> list[llm.Message]:
    """Lower history chronologically; switch messages are dropped.

    Reasoning keeps provider metadata only while the message's model is *model*.
    A local tool becomes an assistant tool call followed by a ``tool`` message.
    """
    out: list[llm.Message] = []
    for message in history:
        out.extend(lower_message(message, model))
    return out


def lower_message(message: m.SessionMessage, model: ModelRef) -> list[llm.Message]:
    """One message's lowering (empty for switch messages); see :func:`lower_history`."""
    if isinstance(message, m.UserMessage):
        files = [llm.FilePart(mime=f.mime, url=f.uri) for f in message.files]
        return [llm.UserMessage(content=[llm.TextPart(text=message.text), *files])]
    if isinstance(message, m.SyntheticMessage):
        return [llm.UserMessage(content=[llm.TextPart(text=message.text)])]
    if isinstance(message, m.SystemMessage):
        return [llm.SystemMessage(text=message.text)]
    if isinstance(message, m.AssistantMessage):
        return _assistant(message, same_model=message.model == model)
    return []


def _assistant(message: m.AssistantMessage, *, same_model: bool) -> list[llm.Message]:
    parts: list[llm.TextPart | llm.ReasoningPart | llm.ToolCallPart | llm.ToolResultPart] = []
    results: list[llm.ToolResultPart] = []
    for item in message.content:
        if isinstance(item, m.AssistantText):
            parts.append(llm.TextPart(text=item.text))
        elif isinstance(item, m.AssistantReasoning):
            parts.append(_reasoning(item, same_model))
        elif not isinstance(item.state, m.ToolPending):
            parts.append(llm.ToolCallPart(call_id=item.id, name=item.name, input=item.state.input))
            result = _result(item)
            if result is not None:
                results.append(result)
    lowered: list[llm.Message] = [llm.AssistantMessage(content=parts)] if parts else []
    if results:
        lowered.append(llm.ToolMessage(content=results))
    return lowered


def _reasoning(item: m.AssistantReasoning, same_model: bool) -> llm.TextPart | llm.ReasoningPart:
    if not same_model:
        return llm.TextPart(text=item.text)
    meta = None if item.provider_metadata is UNSET else item.provider_metadata
    return llm.ReasoningPart(text=item.text, provider_metadata=meta)


def _result(tool: m.AssistantTool) -> llm.ToolResultPart | None:
    state = tool.state
    if isinstance(state, m.ToolCompleted):
        content = _content(state.content)
        return llm.ToolResultPart(
            call_id=tool.id, name=tool.name, content=content, structured=state.structured or None
        )
    if isinstance(state, m.ToolError):
        text: list[llm.TextPart | llm.FilePart] = [llm.TextPart(text=state.error.message)]
        return llm.ToolResultPart(call_id=tool.id, name=tool.name, content=text, is_error=True)
    return None


def _content(parts: list[ToolContent]) -> list[llm.TextPart | llm.FilePart]:
    return [
        llm.FilePart(mime=p.mime, url=p.uri)
        if isinstance(p, ToolFileContent)
        else llm.TextPart(text=p.text)
        for p in parts
    ]
