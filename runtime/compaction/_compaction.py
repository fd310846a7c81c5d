"""Compaction, sans-IO: when a request is over budget, what a checkpoint replaces, the
summarising request, the serialized recent context, and which old tool results to prune.

A checkpoint replaces every message of the model-visible history up to the last
complete turn (the trailing prompts and System messages of the pending turn stay as
they are). It holds a structured rolling summary, written by the session's model under
the ``compaction`` agent, and the newest compacted messages serialized as text within
a token budget (and, when configured, a number of turns): provider-native assistant,
reasoning and tool messages never cross the boundary. A later compaction hands the
previous summary to the summariser with the messages compacted since, so the summary
is updated rather than re-summarised.

Token counts are estimated as characters / 4 unless the provider reported usage for
the same request prefix (:func:`estimate_request`).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Final

import msgspec
from msgspec import UNSET

from runtime import _messages as m
from runtime import llm
from runtime._history import latest_checkpoint
from runtime._schema import ToolTextContent

__all__ = [
    "COMPACTION_PROMPT",
    "CheckpointPlan",
    "CompactionSettings",
    "RequestChars",
    "UsageMark",
    "estimate_request",
    "estimate_tokens",
    "over_budget",
    "plan_checkpoint",
    "prune_calls",
    "recent_context",
    "request_chars",
    "serialize_message",
    "summary_request",
]

_TRUNCATED: Final = "\n[truncated]"
_encode = msgspec.json.Encoder().encode

COMPACTION_PROMPT: Final = """\
You are the compaction agent of a coding assistant. A long conversation between a \
developer and the assistant is being checkpointed: everything you are shown will be \
replaced by your summary (plus a verbatim copy of the newest messages), and the \
assistant will continue the work from it alone.

Write the updated structured summary in Markdown with exactly these sections:
## Goal
## Instructions and constraints
## Progress
## Key facts and decisions
## Files and code
## Next steps

When a previous summary is given, update it with the new conversation: keep every fact, \
decision, file and instruction that still holds, change what the new messages changed, \
and drop only what is no longer true. Be specific (names, paths, numbers, commands, \
errors); never invent anything. Answer with the summary only.\
"""


class CompactionSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the ``compaction`` configuration decides (defaults for what is unset).

    Attributes:
        auto: compact automatically before a provider turn over budget.
        prune: prune old local tool results beyond ``prune_protect`` tokens.
        buffer: headroom kept free below the model's window (the reserve is the greater
            of this and the model's output allowance).
        keep_tokens: the serialized recent context's budget.
        tail_turns: at most this many of the newest turns (a prompt and what followed it)
            in the recent context, within ``keep_tokens``; None bounds it by tokens alone,
            0 leaves it empty (the checkpoint is the summary alone).
        summary_tokens: the summary's output bound.
        tool_chars: one tool result's characters in serialized context.
        summary_input_tokens: the summarising request's input bound when the model's
            window is unknown.
        prune_protect: the newest tool results' tokens that are never pruned.
        prune_minimum: prune only when at least this many tokens would go.
    """

    auto: bool = True
    prune: bool = False
    buffer: int = 20_000
    keep_tokens: int = 8_000
    tail_turns: int | None = None
    summary_tokens: int = 4_096
    tool_chars: int = 2_000
    summary_input_tokens: int = 100_000
    prune_protect: int = 40_000
    prune_minimum: int = 20_000


class UsageMark(msgspec.Struct, frozen=True):
    """A request's size in characters and the input tokens the provider counted for it."""

    chars: int
    tokens: int


class CheckpointPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What one compaction replaces: the messages after the previous checkpoint's
    boundary up to ``boundary_seq`` (the last complete turn), and the previous summary."""

    previous_summary: str | None
    compacted: list[tuple[int, m.SessionMessage]]
    boundary_seq: int


def estimate_tokens(chars: int) -> int:
    """Tokens of *chars* characters: characters / 4, rounded."""
    return round(chars / 4)


def request_chars(request: llm.LLMRequest) -> int:
    """The characters of a request's model-visible parts (system, messages, tools) as JSON."""
    return (
        len(_encode(request.system)) + len(_encode(request.messages)) + len(_encode(request.tools))
    )


class RequestChars:
    """``request_chars`` for one session's requests, turn after turn: a session sends the
    same immutable message objects turn after turn (``HistoryView.lowered``), so the
    lengths of the leading messages that are the very objects of the last request measured
    are kept, and a request costs the encoding of the messages after them, not of its
    whole history. It holds the last request's messages only. Use from one task."""

    def __init__(self) -> None:
        self._messages: list[llm.Message] = []
        self._ends: list[int] = []
        """The JSON length of ``_messages[: i + 1]``'s items, summed, at ``i``."""
        self._tools: list[llm.ToolDefinition] = []
        self._tools_chars = 2
        """The JSON length of ``_tools`` (the last request's definitions, the same objects
        turn after turn while the registry keeps its catalog)."""

    @property
    def cached(self) -> int:
        """Messages whose length is kept (those of the last request measured)."""
        return len(self._messages)

    def __call__(self, request: llm.LLMRequest) -> int:
        """``request_chars(request)``, exactly: a JSON array is its items' lengths, one
        comma between each two, and two brackets."""
        messages = request.messages
        same = list(map(operator.is_, self._messages, messages))  # compared in C
        kept = same.index(False) if False in same else len(same)
        ends = self._ends[:kept]
        total = ends[-1] if ends else 0
        for message in messages[kept:]:
            total += len(_encode(message))
            ends.append(total)
        self._messages, self._ends = list(messages), ends
        listed = 2 + total + max(len(messages) - 1, 0)
        tools = request.tools
        if len(tools) != len(self._tools) or not all(map(operator.is_, self._tools, tools)):
            self._tools, self._tools_chars = list(tools), len(_encode(tools))
        return len(_encode(request.system)) + listed + self._tools_chars


def estimate_request(chars: int, known: UsageMark | None) -> int:
    """Tokens of a request of *chars* characters. With *known* usage of a request whose
    prefix this one extends (no compaction or new epoch between), the provider's count
    plus an estimate of what was added; else characters / 4."""
    if known is not None and chars >= known.chars:
        return known.tokens + estimate_tokens(chars - known.chars)
    return estimate_tokens(chars)


def over_budget(tokens: int, *, context: int, output: int, settings: CompactionSettings) -> bool:
    """Whether a request of *tokens* exceeds the window *context* minus the reserve, the
    greater of the output allowance *output* and ``settings.buffer``, but never more than
    half the window (a window under twice the reserve would otherwise compact before every
    turn). An unknown window (0) is never exceeded."""
    if context <= 0:
        return False
    return tokens > context - min(max(output, settings.buffer), context // 2)


def _complete_turn_end(message: m.SessionMessage) -> bool:
    """Whether *message* ends a complete turn: an assistant message that said or did
    something (a failed, empty attempt is part of the pending turn)."""
    return isinstance(message, m.AssistantMessage) and bool(message.content)


def plan_checkpoint(rows: Sequence[tuple[int, m.SessionMessage]]) -> CheckpointPlan | None:
    """What a compaction of the chronological history *rows* replaces; None when no
    complete turn is left to compact after the latest checkpoint."""
    checkpoint = latest_checkpoint(rows)
    boundary = -1 if checkpoint is None else checkpoint[1].metadata.boundary_seq
    candidates: list[tuple[int, m.SessionMessage]] = [
        (seq, message)
        for seq, message in rows
        if seq > boundary and not isinstance(message, m.CompactionMessage)
    ]
    last = max(
        (i for i, (_, message) in enumerate(candidates) if _complete_turn_end(message)),
        default=-1,
    )
    if last < 0:
        return None
    compacted = candidates[: last + 1]
    return CheckpointPlan(
        previous_summary=None if checkpoint is None else checkpoint[1].summary,
        compacted=compacted,
        boundary_seq=compacted[-1][0],
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + _TRUNCATED


def _tool_text(tool: m.AssistantTool, limit: int) -> str:
    state = tool.state
    if isinstance(state, m.ToolError):
        return "error: " + _clip(state.error.message, limit)
    if isinstance(state, m.ToolCompleted):
        texts = [p.text for p in state.content if isinstance(p, ToolTextContent)]
        text = "\n".join(texts) if texts else _encode(state.structured).decode()
        return _clip(text, limit)
    return "(no result)"


def serialize_message(message: m.SessionMessage, tool_chars: int) -> str:
    """One message as plain text for a checkpoint (empty for messages the model never
    saw: switches, an assistant message with nothing in it; and for Mid-Conversation
    System Messages, whose current state the next epoch's fresh baseline carries).
    Reasoning is left out; each tool result is cut at *tool_chars* characters."""
    if isinstance(message, m.UserMessage):
        files = "".join(f"\n(attached: {f.uri})" for f in message.files)
        return f"[user]\n{message.text}{files}"
    if isinstance(message, m.SyntheticMessage):
        return f"[user]\n{message.text}"
    if not isinstance(message, m.AssistantMessage):
        return ""
    parts: list[str] = []
    for item in message.content:
        if isinstance(item, m.AssistantText) and item.text:
            parts.append(f"[assistant]\n{item.text}")
        elif isinstance(item, m.AssistantTool):
            arguments = _clip(_encode(item.state.input).decode(), tool_chars)
            parts.append(f"[tool call {item.name}] {arguments}")
            parts.append(f"[tool result {item.name}]\n{_tool_text(item, tool_chars)}")
    return "\n".join(parts)


def _blocks(messages: Sequence[m.SessionMessage], tool_chars: int) -> list[str]:
    blocks = (serialize_message(message, tool_chars) for message in messages)
    return [block for block in blocks if block]


def _tail_turns(messages: list[m.SessionMessage], turns: int | None) -> list[m.SessionMessage]:
    """The messages of the newest *turns* turns (all with None). A turn starts at a prompt
    (user or synthetic); messages before the first prompt end a turn begun before the
    previous checkpoint and count as one."""
    if turns is None:
        return messages
    if turns <= 0:
        return []
    starts = [
        i for i, x in enumerate(messages) if isinstance(x, m.UserMessage | m.SyntheticMessage)
    ]
    if not starts or starts[0] > 0:
        starts.insert(0, 0)
    return messages[starts[max(0, len(starts) - turns)] :]


def recent_context(
    plan: CheckpointPlan, *, keep_tokens: int, tool_chars: int, tail_turns: int | None = None
) -> str:
    """The newest compacted messages serialized: those of the newest *tail_turns* turns
    (every turn with None, none with 0), at most *keep_tokens* tokens of them, newest
    first (the newest one cut from its start when it alone is over)."""
    messages = _tail_turns([message for _, message in plan.compacted], tail_turns)
    budget = keep_tokens * 4
    kept: list[str] = []
    used = 0
    for block in reversed(_blocks(messages, tool_chars)):
        if used + len(block) + 2 > budget:
            if not kept and budget > 0:
                kept.append("[...]" + block[len(block) - budget + 5 :])
            break
        kept.append(block)
        used += len(block) + 2
    return "\n\n".join(reversed(kept))


def summary_request(
    plan: CheckpointPlan, *, model: llm.ModelRef, prompt: str, settings: CompactionSettings,
    context: int, output: int,
) -> llm.LLMRequest:  # fmt: skip
    """The request asking *model* (under the compaction agent's *prompt*) for the updated
    structured summary. Its input stays within the window *context* less the summary's
    own allowance (or ``settings.summary_input_tokens`` for an unknown window): the
    oldest new messages are left out first, with a note saying how many."""
    max_output = min(settings.summary_tokens, output) if output > 0 else settings.summary_tokens
    margin = min(1_000, context // 10)  # room for the estimate's error
    window = context - max_output - margin if context > 0 else settings.summary_input_tokens
    previous = plan.previous_summary
    head = (
        f"<previous-summary>\n{previous}\n</previous-summary>\n\n" if previous is not None else ""
    )
    ask = (
        "\n\nUpdate the previous summary with the new conversation above."
        if previous is not None
        else "\n\nSummarize the conversation above."
    )
    budget = max(0, (window - estimate_tokens(len(prompt) + len(head) + len(ask))) * 4)
    blocks = _blocks([message for _, message in plan.compacted], settings.tool_chars)
    kept: list[str] = []
    used = 0
    for block in reversed(blocks):
        if used + len(block) + 2 > budget:
            break
        kept.append(block)
        used += len(block) + 2
    omitted = len(blocks) - len(kept)
    note = f"[{omitted} earlier messages omitted]\n\n" if omitted else ""
    body = "\n\n".join(reversed(kept))
    text = f"{head}<new-conversation>\n{note}{body}\n</new-conversation>{ask}"
    return llm.LLMRequest(
        model=model,
        system=[prompt],
        messages=[llm.UserMessage(content=[llm.TextPart(text=text)])],
        tools=[],
        tool_choice="none",
        generation=llm.GenerationControls(max_output_tokens=max_output),
    )


def prune_calls(
    rows: Sequence[tuple[int, m.SessionMessage]], settings: CompactionSettings
) -> list[tuple[str, str]]:
    """The old local tool results to prune from the visible history *rows*: walking back
    from the latest prompt (the current turn is never touched), every completed result
    older than the newest ``settings.prune_protect`` tokens of results, when together
    they are at least ``settings.prune_minimum`` tokens. Provider-executed results and
    results already pruned are never chosen. ``(assistant message id, call id)`` pairs."""
    last_prompt = max(
        (i for i, (_, message) in enumerate(rows) if isinstance(message, m.UserMessage)),
        default=-1,
    )
    seen = 0
    chosen: list[tuple[str, str]] = []
    chosen_tokens = 0
    for _, message in reversed(rows[: max(last_prompt, 0)]):
        if not isinstance(message, m.AssistantMessage):
            continue
        for item in reversed(message.content):
            if not isinstance(item, m.AssistantTool) or not isinstance(item.state, m.ToolCompleted):
                continue
            if item.provider is not UNSET and item.provider.executed:
                continue
            if item.time.pruned is not UNSET:
                continue
            tokens = estimate_tokens(len(_tool_text(item, 1 << 62)))
            seen += tokens
            if seen > settings.prune_protect:
                chosen.append((message.id, item.id))
                chosen_tokens += tokens
    return chosen if chosen_tokens >= settings.prune_minimum else []
