"""``kittiwake run``'s text rendering: a piped answer is the answer alone."""

from __future__ import annotations

import io

from gateway.cli._printer import NEXT, Printer


def test_a_late_tool_line_does_not_split_a_piped_answer() -> None:
    """The durable events come on a stream of their own: a tool's lines may reach the
    printer after the next step's first deltas. Piped (not a terminal), the answer's text
    stays whole; the tool's lines go to standard error as they come."""
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(out, err, as_json=False)
    printer.delta({"type": NEXT + "text.delta", "data": {"textID": "t2", "delta": "rea"}})
    called = {"callID": "c1", "tool": "read", "input": {"filePath": "notes.txt"}}
    printer.durable({"type": NEXT + "tool.called", "durable": {"seq": 5}, "data": called})
    success = {"callID": "c1", "structured": {}}
    printer.durable({"type": NEXT + "tool.success", "durable": {"seq": 6}, "data": success})
    printer.delta({"type": NEXT + "text.delta", "data": {"textID": "t2", "delta": "d it"}})
    ended = {"textID": "t2", "text": "read it"}
    printer.durable({"type": NEXT + "text.ended", "durable": {"seq": 9}, "data": ended})
    assert out.getvalue() == "read it\n"
    assert err.getvalue() == '→ read {"filePath":"notes.txt"}\n✓ read\n'
