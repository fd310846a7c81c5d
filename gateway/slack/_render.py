"""A run's answer as the text of one Slack message (sans-IO): the answer's text as it streams,
the tool calls summarised beneath it, and, once the run is over, its tokens and cost."""

from __future__ import annotations

from typing import Final

from actors import SessionEvent
from runtime import LiveDelta
from runtime import events as ev

__all__ = ["Answer", "WORKING"]

WORKING: Final = "_working…_"
"""The text of an answer's message before the answer's first words."""
_MARKS: Final = {"running": "⏳", "done": "✅", "failed": "❌"}


class Answer:
    """One run's answer, fed its durable events and live deltas in order.

    ``text()`` is what the message shows now; ``final()`` what it shows once the run is
    over. Text longer than *max_text* keeps its tail.
    """

    def __init__(self, *, max_text: int) -> None:
        self._max_text = max_text
        self._parts: dict[str, str] = {}
        self._ended: set[str] = set()
        self._tools: dict[str, tuple[str, str]] = {}
        self._cost = 0.0
        self._tokens = ev.TokenUsage()
        self.failure: str | None = None

    def feed(self, item: SessionEvent | LiveDelta) -> bool:
        """Take one item; whether the message's text changed."""
        if not isinstance(item, SessionEvent):
            if isinstance(item, ev.TextDelta) and item.text_id not in self._ended:
                self._parts[item.text_id] = self._parts.get(item.text_id, "") + item.delta
                return True
            return False
        match item.event:
            case ev.TextEnded(text_id=text_id, text=text):
                self._ended.add(text_id)
                self._parts[text_id] = text
            case ev.ToolCalled(call_id=call_id, tool=tool, input=data):
                self._tools[call_id] = (_summary(tool, data), "running")
            case ev.ToolSuccess(call_id=call_id) if call_id in self._tools:
                self._tools[call_id] = (self._tools[call_id][0], "done")
            case ev.ToolFailed(call_id=call_id) if call_id in self._tools:
                self._tools[call_id] = (self._tools[call_id][0], "failed")
            case ev.StepEnded(cost=cost, tokens=t):
                total = self._tokens
                self._cost += cost
                self._tokens = ev.TokenUsage(
                    input=total.input + t.input, output=total.output + t.output,
                    reasoning=total.reasoning + t.reasoning,
                    cache=ev.TokenCache(
                        read=total.cache.read + t.cache.read,
                        write=total.cache.write + t.cache.write,
                    ),
                )  # fmt: skip
                return False
            case ev.StepStarted():
                self.failure = None
                return False
            case ev.StepFailed(error=error):
                self.failure = error.message
            case ev.RunFailed(error=error):
                self.failure = error.message
            case _:
                return False
        return True

    @property
    def empty(self) -> bool:
        """Whether nothing was shown: no text, no tool call, no failure."""
        parts = any(p.strip() for p in self._parts.values())
        return not parts and not self._tools and self.failure is None

    def text(self) -> str:
        """The answer so far, its tool calls beneath it."""
        answer = "\n\n".join(p for p in self._parts.values() if p.strip())
        if len(answer) > self._max_text:
            answer = "…" + answer[-(self._max_text - 1) :]
        lines = [answer or WORKING]
        lines += [f"{_MARKS[state]} {summary}" for summary, state in self._tools.values()]
        if self.failure is not None:
            lines.append(f":warning: {self.failure}")
        return "\n".join(lines)

    def final(self) -> str:
        """The whole answer with its tokens and cost."""
        text = self.text()
        if text.startswith(WORKING):
            text = "_(no answer)_" + text[len(WORKING) :]
        t = self._tokens
        return (
            f"{text}\n_tokens: {t.input:,} in · {t.output:,} out"
            f"{f' · {t.cache.read:,} cached' if t.cache.read else ''} · ${self._cost:.4f}_"
        )


def _summary(tool: str, data: dict[str, object]) -> str:
    """A tool call in a line: its name and its main argument."""
    for key in ("description", "command", "filePath", "path", "pattern", "url", "query"):
        value = data.get(key)
        if isinstance(value, str) and value:
            shown = value if len(value) <= 80 else value[:79] + "…"
            return f"`{tool}` {shown}"
    return f"`{tool}`"
