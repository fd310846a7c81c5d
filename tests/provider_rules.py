"""Whether a provider accepts a request: the history rules OpenAI, Anthropic and Gemini
enforce on the messages of one request, checked on the provider-neutral ``LLMRequest``.

``request_problems`` lists what a provider would reject; ``lost_answers`` what an
answer recorded in history but missing from the request would look like (two user
messages in a row where the history holds an assistant answer between them).
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime import llm
from runtime import messages as m

__all__ = ["assert_accepted", "lost_answers", "request_problems"]


def request_problems(request: llm.LLMRequest) -> list[str]:
    """What a provider would reject in *request*; empty when it would accept it.

    - the conversation opens with a user message (Anthropic, Gemini);
    - an assistant message says something: a non-empty text or reasoning, or a tool
      call (OpenAI rejects ``{"role": "assistant", "content": null}`` without tool calls);
    - every local tool call is answered, once, in the tool message right after its
      assistant message, and a tool message answers only the calls just made.
    """
    problems: list[str] = []
    messages = request.messages
    conversation = [x for x in messages if not isinstance(x, llm.SystemMessage)]
    if conversation and not isinstance(conversation[0], llm.UserMessage):
        problems.append(f"opens with {type(conversation[0]).__name__}, not a user message")
    for index, message in enumerate(messages):
        if isinstance(message, llm.AssistantMessage):
            problems += _assistant_problems(index, message, messages)
        elif isinstance(message, llm.ToolMessage):
            previous = messages[index - 1] if index else None
            if not isinstance(previous, llm.AssistantMessage) or not _local_calls(previous):
                problems.append(f"message {index}: tool results that answer no tool call")
    return problems


def _local_calls(message: llm.AssistantMessage) -> list[str]:
    return [
        part.call_id
        for part in message.content
        if isinstance(part, llm.ToolCallPart) and not part.provider_executed
    ]


def _assistant_problems(
    index: int, message: llm.AssistantMessage, messages: Sequence[llm.Message]
) -> list[str]:
    problems: list[str] = []
    said = any(  # reasoning with text counts: adapters carry it or leave the turn out
        isinstance(part, llm.ToolCallPart) or getattr(part, "text", "") for part in message.content
    )
    if not said:
        problems.append(f"message {index}: an empty assistant message")
    calls = _local_calls(message)
    if not calls:
        return problems
    following = messages[index + 1] if index + 1 < len(messages) else None
    answered = (
        [part.call_id for part in following.content]
        if isinstance(following, llm.ToolMessage)
        else []
    )
    for call in calls:
        if answered.count(call) != 1:
            problems.append(f"message {index}: tool call {call} answered {answered.count(call)}x")
    for extra in set(answered) - set(calls):
        problems.append(f"message {index + 1}: a result for {extra}, which was not called")
    return problems


def lost_answers(request: llm.LLMRequest, history: Sequence[m.SessionMessage]) -> list[str]:
    """Two user messages in a row in *request* where *history* (the session's stored
    messages, chronological) holds an assistant answer with content between them.

    User messages are matched by their text, which the caller keeps unique.
    """
    texts = [_user_text(x) for x in request.messages]
    position = {
        message.text: index
        for index, message in enumerate(history)
        if isinstance(message, m.UserMessage)
    }
    lost: list[str] = []
    for first, second in zip(texts, texts[1:], strict=False):
        if first is None or second is None or first not in position or second not in position:
            continue
        between = history[position[first] + 1 : position[second]]
        if any(isinstance(x, m.AssistantMessage) and _has_content(x) for x in between):
            lost.append(f"the answer to {first!r} is missing before {second!r}")
    return lost


def _user_text(message: llm.Message) -> str | None:
    if not isinstance(message, llm.UserMessage):
        return None
    return "".join(part.text for part in message.content if isinstance(part, llm.TextPart))


def _has_content(message: m.AssistantMessage) -> bool:
    return any(
        isinstance(part, m.AssistantTool) or (isinstance(part, m.AssistantText) and part.text)
        for part in message.content
    )


def assert_accepted(
    request: llm.LLMRequest, history: Sequence[m.SessionMessage] | None = None
) -> None:
    """Fail with every problem found when a provider would not accept *request* (or,
    given the session's *history*, when the request lost an answer)."""
    problems = request_problems(request)
    if history is not None:
        problems += lost_answers(request, history)
    assert not problems, (problems, request.messages)
