"""A long session on a 32k window: the request stays bounded, so turns do not slow down.

Usage: .venv/bin/python bench/compaction.py [--dir DIR] [--turns N] [--window TOKENS]

One session, N sequential prompts (about 500 tokens each, answered with about 200) in an
embedded runtime with the default tools and context, on a zero-latency ScriptedLLM whose
model has a TOKENS window and a 4096-token output allowance; default compaction settings.
Summary requests are answered at once with a 2000-character summary, so the figures are
the runtime's own cost. Reports:

- prompt to answer: ``rt.sessions.prompt`` until ``wait_idle`` returns, median over the
  first and the last 100 turns (compactions included where they happened);
- the compaction's own cost (the model excluded): the ``compaction`` spans' durations;
- the largest request sent (estimated tokens) against the window;
- the data dir's growth per turn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import trio
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime import Location, Prompt, open_runtime
from runtime.compaction import COMPACTION_PROMPT, estimate_tokens, request_chars
from runtime.llm import (
    LLMEvent,
    LLMRequest,
    ModelLimit,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
)
from runtime.telemetry import recording

WORDS = "the quick brown fox jumps over the lazy dog while the compiler runs the tests ".split()


def _text(seed: int, chars: int) -> str:
    words = [WORDS[(seed * 7 + i) % len(WORDS)] for i in range(chars // 5)]
    return " ".join(words)[:chars]


class Model:
    """Answers turns and summaries at once; remembers the largest request."""

    def __init__(self) -> None:
        self.largest = 0
        self.turns = 0
        self.summaries = 0

    def __call__(self, request: LLMRequest) -> Sequence[LLMEvent]:
        self.largest = max(self.largest, estimate_tokens(request_chars(request)))
        if request.system and request.system[0] == COMPACTION_PROMPT:
            self.summaries += 1
            text = "## Goal\n" + _text(self.summaries, 2000)
        else:
            self.turns += 1
            text = _text(self.turns, 800)
        return (
            StepStart(),
            TextStart(id="t"),
            TextDelta(id="t", delta=text),
            TextEnd(id="t"),
            StepFinish(finish_reason="stop", usage=Usage(output_tokens=len(text) // 4)),
        )


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def run(directory: Path, turns: int, window: int) -> dict[str, object]:
    model = Model()
    client = ScriptedLLM(
        model, event_checkpoints=False, limit=ModelLimit(context=window, output=4096)
    )
    exporter = InMemorySpanExporter()
    work = directory / "work"
    work.mkdir()
    durations: list[float] = []
    sizes: dict[int, int] = {}
    with recording(SimpleSpanProcessor(exporter)):
        async with open_runtime(data_dir=directory / "data", llm=client) as rt:
            info = await rt.sessions.create(location=Location(directory=str(work)))
            for turn in range(turns):
                text = f"Turn {turn}: " + _text(turn, 2000)
                started = time.perf_counter()
                await rt.sessions.prompt(info.id, prompt=Prompt(text=text))
                await rt.sessions.wait_idle(info.id)
                durations.append(time.perf_counter() - started)
                if turn + 1 in (100, turns):
                    sizes[turn + 1] = _size(directory / "data")
            context = await rt.sessions.context(info.id)
    files = {
        str(f.relative_to(directory / "data")): f.stat().st_size
        for f in (directory / "data").rglob("*")
        if f.is_file() and f.stat().st_size > 100_000
    }
    spans = [s for s in exporter.get_finished_spans() if s.name == "compaction"]
    costs = [(s.end_time - s.start_time) / 1e6 for s in spans if s.end_time and s.start_time]
    outcomes = [s.attributes.get("compaction.outcome") for s in spans if s.attributes]
    first, last = durations[:100], durations[-100:]
    return {
        "turns": turns,
        "window": window,
        "compactions": len(spans),
        "completed": outcomes.count("completed"),
        "first_100_median_ms": round(statistics.median(first) * 1000, 2),
        "last_100_median_ms": round(statistics.median(last) * 1000, 2),
        "ratio": round(statistics.median(last) / statistics.median(first), 2),
        "compaction_median_ms": round(statistics.median(costs), 2) if costs else None,
        "compaction_max_ms": round(max(costs), 2) if costs else None,
        "largest_request_tokens": model.largest,
        "context_messages_at_end": len(context),
        "data_dir_bytes": sizes,
        "largest_files": files,
        "bytes_per_turn_after_100": round((sizes[turns] - sizes.get(100, 0)) / max(1, turns - 100))
        if turns > 100
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=32_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        result = trio.run(run, Path(tmp), args.turns, args.window)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
