"""Live-only events: streamed to a session's subscribers as they happen, never stored
(text, reasoning and tool-input deltas, a running tool's output, compaction progress,
provider retries)."""

from __future__ import annotations

from runtime._record import Event, Record

__all__ = [
    "CompactionDelta",
    "LiveDelta",
    "ReasoningDelta",
    "Retried",
    "RetryError",
    "TextDelta",
    "ToolInputDelta",
    "ToolOutputDelta",
]


class TextDelta(Event, frozen=True, tag="session.next.text.delta"):
    assistant_message_id: str
    text_id: str
    delta: str


class ReasoningDelta(Event, frozen=True, tag="session.next.reasoning.delta"):
    assistant_message_id: str
    reasoning_id: str
    delta: str


class ToolInputDelta(Event, frozen=True, tag="session.next.tool.input.delta"):
    assistant_message_id: str
    call_id: str
    delta: str


class ToolOutputDelta(Event, frozen=True, tag="session.next.tool.output.delta"):
    """Output a running local tool produced (live only; Kittiwake's): the shell tool's
    stdout and stderr as it reads them. The settled result holds what is kept."""

    assistant_message_id: str
    call_id: str
    delta: str


class CompactionDelta(Event, frozen=True, tag="session.next.compaction.delta"):
    """Progress of a compaction's summary (live only: ``compaction.ended`` holds it all)."""

    message_id: str
    text: str


class RetryError(Record, frozen=True):
    message: str
    is_retryable: bool = True


class Retried(Event, frozen=True, tag="session.next.retried"):
    """A provider turn's request failed retryably and is tried again (live only; OpenCode's
    ``session.next.retried``): attempt *attempt* failed with *error*, the next starts at
    *next* (ms since the epoch; Kittiwake's addition)."""

    attempt: int
    error: RetryError
    next: int


LiveDelta = (
    TextDelta | ReasoningDelta | ToolInputDelta | ToolOutputDelta | CompactionDelta | Retried
)
