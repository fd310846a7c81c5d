"""What the plugins' ``chat_message`` hook costs per admission.

Usage: .venv/bin/python bench/chat_message.py [--admissions N] [--pairs N]

- the hook's own step (``admission_prompt``, what ``Sessions.prompt`` asks before its
  write) in a Location without a plugin and in one with one plugin changing the prompt's
  text (for a session whose actor is not active, and for one whose actor is), N calls
  each (median);
- whole admissions (``rt.sessions.prompt``, ``resume=False``: the durable write, no
  drain), two real runtimes open at once (DuckDB), one without plugins and one with that
  plugin, a session each, admitted alternately, *pairs* times: with ids the runtime makes,
  and with ids the caller gives (an admission then reads whether the id is admitted
  already, so that an exact retry does not ask the plugins again).

Each whole-admission line: both medians and the median paired overhead (``bench/_pairs.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from runtime import Location, Prompt, open_runtime
from runtime.llm import (
    LLMEvent,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
)
from runtime.plugins import ChatMessage, hookimpl

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from actors.api._chat_message import admission_prompt  # noqa: E402
from bench._pairs import first_is_off, pair_report  # noqa: E402

_ANSWER: list[LLMEvent] = [
    StepStart(), TextStart(id="t"), TextDelta(id="t", delta="done"), TextEnd(id="t"),
    StepFinish(finish_reason="stop", usage=Usage(input_tokens=10, output_tokens=1)),
]  # fmt: skip


class Ticket:
    """Appends a line to every prompt."""

    name = "ticket"

    @hookimpl
    def chat_message(self, message: ChatMessage, prompt: Prompt) -> Prompt:
        return msgspec.structs.replace(prompt, text=f"{prompt.text}\n\n[ticket KW-7]")


async def _open(folder: Path, plugins: list[Any]) -> tuple[Any, Path]:
    work = folder / "work"
    work.mkdir(parents=True)
    client = ScriptedLLM(lambda request: _ANSWER)
    return open_runtime(data_dir=folder / "data", llm=client, plugins=plugins), work


async def _session(rt: Any, work: Path) -> str:
    sid: str = (await rt.sessions.create(location=Location(directory=str(work)))).id
    await rt.sessions.prompt(sid, prompt=Prompt(text="warm"), resume=False)  # opens the Location
    return sid


async def hook_step(admissions: int) -> list[str]:
    """``admission_prompt`` alone (no write): without the plugin, with it for a session
    whose actor is not active (its info is read), and with it for one whose actor is
    (after a turn: its info is in memory)."""
    lines = []
    cases = (("no plugin", [], False), ("one plugin, session not active", [Ticket()], False),
             ("one plugin, session active", [Ticket()], True))  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        for label, plugins, active in cases:
            opening, work = await _open(Path(folder) / label, plugins)
            async with opening as rt:
                sid = await _session(rt, work)
                if active:
                    await rt.sessions.prompt(sid, prompt=Prompt(text="run"))
                    await rt.sessions.wait_idle(sid)
                    assert rt.execution.known_info(sid) is not None
                times = []
                for i in range(admissions):
                    started = time.perf_counter()
                    await admission_prompt(
                        rt.execution, rt.storage, sid, f"msg_b{i}", Prompt(text="fix it"),
                        "steer", retry=False,
                    )  # fmt: skip
                    times.append(time.perf_counter() - started)
            lines.append(f"  {label}: {statistics.median(times) * 1e6:.2f} us (median)")
    return lines


async def _admit(rt: Any, sid: str, text: str, id: str | None) -> float:
    started = time.perf_counter()
    await rt.sessions.prompt(sid, prompt=Prompt(text=text), id=id, resume=False)
    return time.perf_counter() - started


async def admissions(pairs: int, *, caller_ids: bool) -> str:
    """Two runtimes at once, without and with the plugin; *pairs* admissions on each,
    alternately first."""
    with tempfile.TemporaryDirectory() as folder:
        off_opening, off_work = await _open(Path(folder) / "off", [])
        on_opening, on_work = await _open(Path(folder) / "on", [Ticket()])
        async with off_opening as off_rt, on_opening as on_rt:
            sides = [(off_rt, await _session(off_rt, off_work)),
                     (on_rt, await _session(on_rt, on_work))]  # fmt: skip
            off: list[float] = []
            on: list[float] = []
            for pair in range(pairs):
                order = [(sides[0], off), (sides[1], on)]
                for (rt, sid), into in order if first_is_off(pair) else reversed(order):
                    id = f"msg_p{pair}" if caller_ids else None
                    into.append(await _admit(rt, sid, f"prompt {pair}", id))
    label = "caller's ids" if caller_ids else "runtime's ids"
    return pair_report(f"  one plugin, {label}", off, on, unit="ms", scale=1e3)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admissions", type=int, default=2000, help="hook steps per side")
    parser.add_argument("--pairs", type=int, default=500, help="whole admission pairs")
    args = parser.parse_args()
    print(f"the hook's step per admission ({args.admissions} calls):")
    for line in await hook_step(args.admissions):
        print(line)
    print(f"whole admissions ({args.pairs} pairs, against no plugin):")
    print(await admissions(args.pairs, caller_ids=False))
    print(await admissions(args.pairs, caller_ids=True))


if __name__ == "__main__":
    trio.run(main)
