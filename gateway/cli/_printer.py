"""How ``kittiwake run`` renders a session's events: the answer's text to standard output
as it streams, tool calls (with a file tool's diff and the language server's errors in the
files it touched) and failures to standard error, or every event as one JSON line, each
delta held until the durable event that opens its part."""

from __future__ import annotations

from typing import Any, Final, TextIO

import msgspec

__all__ = ["NEXT", "PARTS", "Printer"]

NEXT: Final = "session.next."
_TODO_MARKS: Final = {
    "pending": "[ ]",
    "in_progress": "[>]",
    "completed": "[x]",
    "cancelled": "[-]",
}
_SUMMARY_CHARS: Final = 120
_DIFF_LINES: Final = 60
"""Lines of a file tool's diff shown after its ``✓`` line (the rest is counted)."""
PARTS: Final = {
    "text.delta": ("textID", "text.started", "text.ended"),
    "reasoning.delta": ("reasoningID", "reasoning.started", "reasoning.ended"),
    "tool.input.delta": ("callID", "tool.input.started", "tool.input.ended"),
    "tool.output.delta": ("callID", "tool.called", "tool.success", "tool.failed"),
    "compaction.delta": ("messageID", "compaction.started", "compaction.ended"),
}
"""A delta kind: the field naming its part, the durable event opening the part, and those
ending it (``session.next.`` left out)."""
_OPENS: Final = {f"{NEXT}{v[1]}": (k, v[0]) for k, v in PARTS.items()}
_ENDS: Final = {f"{NEXT}{end}": (k, v[0]) for k, v in PARTS.items() for end in v[2:]}


class Printer:
    """Renders events: text to *out* as it streams, tools and failures to *err*.

    A line of *err* printed while a text is streaming ends the text's line on *out* first
    when both are terminals (one screen); when *out* is not, it holds the answer alone
    (piped), which such a line never splits. Durable events arrive on a stream of their
    own, so one (a tool's ``✓``) may come after the next step's first deltas.
    """

    def __init__(self, out: TextIO, err: TextIO, *, as_json: bool) -> None:
        self.out, self.err, self.as_json = out, err, as_json
        self._one_screen = out.isatty() and err.isatty()
        self.last_seq = -1
        self._open: set[tuple[str, str]] = set()
        self._ended_parts: set[tuple[str, str]] = set()
        self._held: dict[tuple[str, str], list[dict[str, Any]]] = {}
        """JSON deltas (by delta kind and part) waiting for the event that opens their part."""
        self.failure: str | None = None
        self.last_finish: str | None = None
        self._printed: dict[str, str] = {}
        self._ended: set[str] = set()
        self._tools: dict[str, str] = {}
        self._inputs: dict[str, Any] = {}
        self._open_line = False

    def delta(self, event: dict[str, Any]) -> None:
        if self.as_json:
            self._json_delta(event)
            return
        data = event["data"]
        if event["type"] != NEXT + "text.delta" or data.get("textID") in self._ended:
            return
        text_id = data.get("textID", "")
        self._printed[text_id] = self._printed.get(text_id, "") + data.get("delta", "")
        self._write(self.out, data.get("delta", ""))

    def durable(self, event: dict[str, Any]) -> None:
        """A durable event, shown once (by its seq)."""
        seq = event["durable"]["seq"]
        if seq <= self.last_seq:
            return
        self.last_seq = seq
        self._show(event)

    def release_all(self) -> None:
        """Print the JSON deltas still held (the event opening their part never came)."""
        for held in self._held.values():
            for event in held:
                self._line(event)
        self._held.clear()

    def _json_delta(self, event: dict[str, Any]) -> None:
        kind = event["type"].removeprefix(NEXT)
        named = PARTS.get(kind)
        part = None if named is None else (kind, str(event["data"].get(named[0])))
        if part is None or part in self._open:
            self._line(event)
        elif part not in self._ended_parts:
            self._held.setdefault(part, []).append(event)

    def _json_durable(self, event: dict[str, Any]) -> None:
        kind, data = event["type"], event["data"]
        ending = _ENDS.get(kind)
        if ending is not None:
            part = (ending[0], str(data.get(ending[1])))
            self._open.discard(part)
            self._ended_parts.add(part)
            for held in self._held.pop(part, []):  # its opening came before this run
                self._line(held)
        self._line(event)
        opening = _OPENS.get(kind)
        if opening is not None:
            part = (opening[0], str(data.get(opening[1])))
            self._open.add(part)
            for held in self._held.pop(part, []):
                self._line(held)

    def _show(self, event: dict[str, Any]) -> None:
        kind, data = event["type"], event["data"]
        if kind == NEXT + "step.failed":
            self.failure = data.get("error", {}).get("message") or "the step failed"
        elif kind == NEXT + "step.ended":
            self.last_finish = data.get("finish")
        if self.as_json:
            self._json_durable(event)
        elif kind == NEXT + "text.ended":
            self._text_ended(data)
        elif kind == NEXT + "tool.called":
            self._tools[data["callID"]] = data["tool"]
            self._inputs[data["callID"]] = data.get("input")
            self._note(f"→ {data['tool']} {_summary(data.get('input'))}")
        elif kind == NEXT + "tool.success":
            self._succeeded(data)
        elif kind == NEXT + "tool.failed":
            message = data.get("error", {}).get("message", "")
            self._note(f"✗ {self._tools.get(data['callID'], 'tool')}: {message}")
        elif kind == NEXT + "step.failed":
            self._note(f"kittiwake: step failed: {self.failure}")
        elif kind == "todo.updated":
            self._note("todos:")
            for todo in data.get("todos", []):
                mark = _TODO_MARKS.get(todo.get("status", ""), "[?]")
                self._note(f"  {mark} {todo.get('content', '')}")

    def _succeeded(self, data: dict[str, Any]) -> None:
        """``✓ tool``, then for a file tool its path, its diff and the errors found in the
        files it touched."""
        call = data.get("callID", "")
        tool, given = self._tools.get(call, "tool"), self._inputs.pop(call, None)
        structured = data.get("structured") or {}
        path = structured.get("path") if tool in ("write", "edit") else None
        self._note(f"✓ {tool} {path}" if isinstance(path, str) else f"✓ {tool}")
        diff = structured.get("diff") if isinstance(path, str) else None
        if tool == "write" and structured.get("created") and isinstance(given, dict):
            diff = _created_diff(str(path), given.get("content"))
        if isinstance(diff, str) and diff:
            lines = diff.splitlines()
            for line in lines[:_DIFF_LINES]:
                self._note(f"  {line}")
            if len(lines) > _DIFF_LINES:
                self._note(f"  … {len(lines) - _DIFF_LINES} more lines")
        found = structured.get("diagnostics")
        for file, diagnostics in found.items() if isinstance(found, dict) else ():
            for diagnostic in diagnostics:
                self._note(f"  {_diagnostic(file, diagnostic)}")

    def asked(self, event: dict[str, Any]) -> None:
        if self.as_json:
            self._line(event)

    def note(self, text: str) -> None:
        self._note(text)

    def _text_ended(self, data: dict[str, Any]) -> None:
        text_id, text = data.get("textID", ""), data.get("text", "")
        self._ended.add(text_id)
        printed = self._printed.pop(text_id, "")
        rest = text[len(printed) :] if text.startswith(printed) else "\n" + text
        self._write(self.out, rest)
        if self._open_line:
            self._write(self.out, "\n")

    def _note(self, text: str) -> None:
        if self._open_line and self._one_screen:
            self._write(self.out, "\n")
        self.err.write(text + "\n")
        self.err.flush()

    def _write(self, stream: TextIO, text: str) -> None:
        if not text:
            return
        stream.write(text)
        stream.flush()
        self._open_line = not text.endswith("\n")

    def _line(self, event: dict[str, Any]) -> None:
        self.out.write(msgspec.json.encode(event).decode() + "\n")
        self.out.flush()


def _summary(value: Any) -> str:
    text = msgspec.json.encode(value).decode() if value is not None else ""
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


def _created_diff(path: str, content: Any) -> str | None:
    """The diff of a ``write`` that created *path* (relative) with *content*."""
    if not isinstance(content, str):
        return None
    from runtime.tools import file_patch  # deferred: only a run that creates a file needs it

    return file_patch("", content, path).patch


def _diagnostic(file: str, diagnostic: dict[str, Any]) -> str:
    """An LSP error as ``error FILE:LINE:COL: message (source)``, 1-based."""
    start = diagnostic.get("range", {}).get("start", {})
    source = f" ({diagnostic['source']})" if diagnostic.get("source") else ""
    where = f"{file}:{start.get('line', 0) + 1}:{start.get('character', 0) + 1}"
    return f"error {where}: {diagnostic.get('message', '')}{source}"
