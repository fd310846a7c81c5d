"""A session's history as a Markdown transcript, and the tokens and cost it spent: what
``kittiwake export --format markdown`` prints and a GitHub reply folds away."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

import msgspec
from msgspec import UNSET

from runtime import SessionInfo, SessionMessage
from runtime import events as ev
from runtime import messages as msg

__all__ = ["DEFAULT_TOOL_OUTPUT", "Usage", "transcript", "usage_of"]

DEFAULT_TOOL_OUTPUT: Final = 2000
"""Characters of a tool call's input and of its output a transcript keeps (each)."""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens and cost of a session's answers, summed."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cost: float = 0.0

    def text(self) -> str:
        """One line: ``1,234 tokens in, 56 out (cache 0), cost $0.0012``."""
        return (
            f"{self.input:,} tokens in, {self.output:,} out (cache {self.cache_read:,}), "
            f"cost ${self.cost:.4f}"
        )


def usage_of(messages: Sequence[SessionMessage]) -> Usage:
    """The tokens and cost of the assistant messages among *messages*."""
    total = Usage()
    for m in messages:
        if not isinstance(m, msg.AssistantMessage):
            continue
        tokens = m.tokens
        total = Usage(
            input=total.input + (tokens.input if tokens is not UNSET else 0),
            output=total.output + (tokens.output if tokens is not UNSET else 0),
            reasoning=total.reasoning + (tokens.reasoning if tokens is not UNSET else 0),
            cache_read=total.cache_read + (tokens.cache.read if tokens is not UNSET else 0),
            cost=total.cost + (m.cost if m.cost is not UNSET else 0.0),
        )
    return total


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n... ({len(text) - limit} more characters)"


def _fence(text: str, language: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language}\n{text}\n{ticks}"


def _tool(part: msg.AssistantTool, limit: int) -> list[str]:
    state = part.state
    status = state.__struct_config__.tag
    raw = state.input if isinstance(state, msg.ToolPending) else json.dumps(state.input, indent=2)
    lines = [f"**Tool `{part.name}`** ({status})", "", _fence(_cut(raw, limit), "json")]
    if isinstance(state, msg.ToolError):
        lines += ["", f"Error: {state.error.message}"]
    if isinstance(state, msg.ToolCompleted | msg.ToolError | msg.ToolRunning):
        output = "\n".join(c.text for c in state.content if isinstance(c, ev.ToolTextContent))
        if output:
            lines += ["", _fence(_cut(output, limit))]
    return lines


def transcript(
    info: SessionInfo, messages: Sequence[SessionMessage], *,
    tool_output: int = DEFAULT_TOOL_OUTPUT,
) -> str:  # fmt: skip
    """*info*'s session and its *messages* (chronological) as Markdown: each prompt, each
    answer's text and tool calls (input and output cut to *tool_output* characters),
    then the tokens and cost."""
    lines = [f"# {info.title}", "", f"Session `{info.id}` in `{info.location.directory}`"]
    for m in messages:
        lines.append("")
        match m:
            case msg.UserMessage():
                lines += ["## User", "", m.text]
            case msg.AssistantMessage():
                model = f"{m.model.provider_id}/{m.model.id}"
                lines += [f"## Assistant ({m.agent}, {model})"]
                for part in m.content:
                    lines.append("")
                    if isinstance(part, msg.AssistantText):
                        lines.append(part.text)
                    elif isinstance(part, msg.AssistantReasoning):
                        lines += [f"> {line}" for line in part.text.splitlines()] or [">"]
                    elif isinstance(part, msg.AssistantTool):
                        lines += _tool(part, tool_output)
                if m.error is not UNSET:
                    lines += ["", f"Error: {m.error.message}"]
            case msg.CompactionMessage():
                lines += ["## Compaction", "", m.summary]
            case msg.SyntheticMessage():
                lines += ["## Note", "", m.text]
            case msg.AgentSwitchedMessage():
                lines += [f"_Agent: {m.agent}_"]
            case msg.ModelSwitchedMessage():
                lines += [f"_Model: {m.model.provider_id}/{m.model.id}_"]
            case _:
                lines.pop()
    lines += ["", "---", "", usage_of(messages).text(), ""]
    return "\n".join(lines)
