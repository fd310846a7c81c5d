"""The inspector in a real headless Chromium: sessions with truthful states, the timeline
waterfall, the charts, totals and errors, read from the DOM and from the screenshot's pixels."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from runtime import Location, Prompt, llm
from storage import TelemetryOptions
from tests.execution.conftest import answer, tool_calls
from tests.gateway.test_inspector_browser import _chromium
from tests.telemetry.test_http import served

FAST = TelemetryOptions(flush_interval=0.01, sample=1.0)
TURN_BLUE = (0x25, 0x63, 0xEB)
TOOL_GREEN = (0x16, 0xA3, 0x4A)
FAILED_RED = (0xDC, 0x26, 0x26)


def png_colours(data: bytes) -> set[tuple[int, int, int]]:
    """Every RGB colour of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    previous, colours = bytearray(stride), set()
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (
                    line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)
                ) & 255
        colours.update((line[i], line[i + 1], line[i + 2]) for i in range(0, stride, channels))
        previous = line
    return colours


async def test_the_inspector_draws_timeline_charts_totals_and_errors(tmp_path: Path) -> None:
    def script(request: llm.LLMRequest) -> list[llm.LLMEvent]:
        text = str(request.messages[0])
        if "fail" in text:
            return [llm.StepStart(), llm.ProviderError(kind="terminal", message="model refused")]
        if len(request.messages) == 1:
            return tool_calls(("c1", "glob", {"pattern": "*.md"}))
        return answer("done")

    async with served(tmp_path, llm.ScriptedLLM(script), telemetry=FAST) as (rt, http, url):
        where = Location(directory=str(tmp_path))
        bad = await rt.sessions.create(location=where, title="Broken session")
        await rt.sessions.prompt(bad.id, prompt=Prompt(text="please fail"))
        await rt.sessions.wait_idle(bad.id)
        good = await rt.sessions.create(location=where, title="Working session")
        await rt.sessions.prompt(good.id, prompt=Prompt(text="list files"))
        await rt.sessions.wait_idle(good.id)
        assert rt.telemetry.force_flush()
        page = f"{url}/inspector"
        shot = tmp_path / "inspector.png"
        dom = (
            await _chromium(
                tmp_path / "p",
                "--window-size=1100,1500",
                "--force-device-scale-factor=0.5",
                f"--screenshot={shot}",
                "--dump-dom",
                page,
            )  # fmt: skip
        ).decode()
    body = dom[dom.find("<body>") :]
    sessions = body[body.find('id="sessions"') : body.find('id="timeline-title"')]
    assert "Working session" in sessions and "Broken session" in sessions
    assert 'class="badge st-failed">failed<' in sessions
    assert 'class="badge st-idle">idle<' in sessions
    assert "ProviderError: model refused" in sessions
    assert "running" not in sessions  # a failed session is not shown as running
    timeline = body[body.find('id="timeline"') : body.find('id="chart-mailbox"')]
    assert "<svg" in timeline and "<rect" in timeline
    assert "turn default" in timeline and "tool glob" in timeline and ">drain<" in timeline
    for chart in ('id="chart-mailbox"', 'id="chart-commit"'):
        part = body[body.find(chart) :]
        assert part.find("<polyline") < part.find("</svg>"), chart
    totals = body[body.find('id="totals"') : body.find('id="sessions"')]
    assert "<b>2</b>" in totals  # sessions
    errors = body[body.find('id="errors"') : body.find('id="locations"')]
    assert "model refused" in errors
    assert str(tmp_path) in body[body.find('id="locations"') :]
    storage = body[body.find('id="storage"') :]
    assert "last commit ms" in storage
    colours = png_colours(shot.read_bytes())
    for colour in (TURN_BLUE, TOOL_GREEN, FAILED_RED):
        assert colour in colours, colour
