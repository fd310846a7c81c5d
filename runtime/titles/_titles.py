"""Session titles: the placeholder a session starts with, and the request and clean-up
for the short title a small model writes after the first prompt. Sans-IO."""

from __future__ import annotations

import re
from typing import Final

import msgspec
from msgspec import UNSET

from runtime import llm
from runtime._schema import SessionInfo

__all__ = [
    "MAX_TITLE_CHARS",
    "TITLE_PROMPT",
    "TitleLimits",
    "clean_title",
    "default_title",
    "needs_title",
    "title_request",
]

MAX_TITLE_CHARS: Final = 60
TITLE_PROMPT: Final = """\
You name conversations between a developer and a coding agent. Given the developer's \
first message, reply with a title for the conversation and nothing else.
- At most 50 characters, in the language of the message.
- Name the task or question (e.g. "Fix flaky login test", "Explain the cache layer"), \
not the fact that someone asked.
- Plain text on one line: no quotes, no Markdown, no trailing period, no "Title:" prefix.
- Never answer the message, ask a question back or refuse; a vague message gets a \
short, general title.\
"""
_THINKING: Final = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_PREFIX: Final = re.compile(r"^(?:title|session title)\s*:\s*", re.IGNORECASE)
_DECORATION: Final = " \t\"'`*#_>.:;-\u201c\u201d\u2018\u2019"


class TitleLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of one title request: characters of the first prompt sent (the rest is cut);
    the answer's token budget (reasoning models spend part of it thinking, so it is well
    above what a title needs); seconds the whole request may take before it is abandoned."""

    max_prompt_chars: int = 4000
    max_output_tokens: int = 2000
    timeout: float = 60.0


def default_title(session_id: str) -> str:
    """The placeholder title of a session created without one."""
    return f"Session {session_id[-8:]}"


def needs_title(info: SessionInfo) -> bool:
    """Whether a title should be written for *info*: a top-level session still carrying its
    placeholder (a child session, or one whose title was set, keeps its own)."""
    return info.parent_id is UNSET and info.title == default_title(info.id)


def title_request(model: llm.ModelRef, prompt: str, limits: TitleLimits) -> llm.LLMRequest:
    """The request asking *model* for a title of a session whose first prompt is *prompt*."""
    text = prompt.strip()[: limits.max_prompt_chars]
    message = f"The developer's first message:\n<message>\n{text}\n</message>"
    return llm.LLMRequest(
        model=model,
        system=[TITLE_PROMPT],
        messages=[llm.UserMessage(content=[llm.TextPart(text=message)])],
        tools=[],
        tool_choice="none",
        generation=llm.GenerationControls(max_output_tokens=limits.max_output_tokens),
    )


def clean_title(answer: str, *, max_chars: int = MAX_TITLE_CHARS) -> str | None:
    """The title in a model's *answer*: thinking blocks dropped, the first non-empty line,
    quotes, Markdown and a ``Title:`` prefix stripped, cut at a word within *max_chars*.
    None when nothing usable is left."""
    text = _THINKING.sub("", answer)
    line = next((ln for ln in text.splitlines() if ln.strip(_DECORATION)), "")
    line = _PREFIX.sub("", line.strip(_DECORATION)).strip(_DECORATION)
    line = " ".join(line.split())
    if not line:
        return None
    if len(line) > max_chars:
        cut = line[: max_chars - 1]
        space = cut.rfind(" ")
        line = (cut[:space] if space > max_chars // 2 else cut).rstrip(_DECORATION) + "\u2026"
    return line
