import base64
import logging
import os
import re
import time

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.agents import BUILD
from runtime.llm import FilePart, TextPart
from runtime.tools import (
    Tool,
    ToolContext,
    ToolEnvironment,
    ToolOutput,
    ToolOutputLimits,
    ToolRegistry,
    ToolSuccess,
    cleanup_tool_output,
    preview,
    run_tool_output_cleanup,
    truncation_marker,
)
from runtime.tools.testing import EchoInput

LIMITS = ToolOutputLimits()


def _ctx(tmp_path) -> ToolContext:
    return ToolContext(
        session_id="ses_1",
        agent="build",
        assistant_message_id="msg_1",
        tool_call_id="call_1",
        directory=str(tmp_path),
    )


def _registry(tmp_path, output: ToolOutput, data_dir=None) -> ToolRegistry:
    env = ToolEnvironment(directory=str(tmp_path), data_dir=str(data_dir or tmp_path / "data"))
    registry = ToolRegistry(env)

    async def produce(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return output

    registry.contribute(Tool(name="produce", description="", input_type=EchoInput, handler=produce))
    return registry


async def _settle(registry: ToolRegistry, tmp_path) -> ToolSuccess:
    result = await registry.settle("produce", {"text": ""}, _ctx(tmp_path), agent=BUILD)
    assert isinstance(result, ToolSuccess)
    return result


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _within(text: str, limits: ToolOutputLimits) -> bool:
    return len(text.split("\n")) <= limits.max_lines and len(text.encode()) <= limits.max_bytes


async def test_two_text_parts_share_one_limit_and_one_file(tmp_path):
    first = "".join(f"a{i:05d} " + "x" * 20 + "\n" for i in range(1100))
    second = "".join(f"b{i:05d} " + "y" * 20 + "\n" for i in range(1100))
    assert 29_000 < len(first.encode()) < 31_000
    result = await _settle(
        _registry(tmp_path, ToolOutput(content=[TextPart(text=first), TextPart(text=second)])),
        tmp_path,
    )
    [path] = result.output_paths
    assert re.fullmatch(r"tool_[0-9a-f]{14}[0-9A-Za-z]{12}", os.path.basename(path))
    assert os.path.dirname(path) == str(tmp_path / "data" / "tool-output")
    assert _read(path) == first + second
    [part] = result.content
    assert isinstance(part, TextPart)
    assert _within(part.text, LIMITS)
    assert part.text.startswith("a00000 ")
    assert part.text.rstrip("\n").endswith("b01099 " + "y" * 20)
    assert truncation_marker(path) in part.text
    assert result.lossy is False


async def test_small_output_is_untouched_and_writes_nothing(tmp_path):
    result = await _settle(_registry(tmp_path, ToolOutput(content=[TextPart(text="ok")])), tmp_path)
    assert result == ToolSuccess(content=[TextPart(text="ok")])
    assert not (tmp_path / "data").exists()


async def test_unwritable_managed_dir_keeps_success_lossy_without_path(tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data dir should be")
    big = "line\n" * 5000
    caplog.set_level(logging.WARNING, logger="runtime.tools")
    result = await _settle(
        _registry(tmp_path, ToolOutput(content=[TextPart(text=big)]), data_dir=blocker), tmp_path
    )
    assert result.lossy is True
    assert result.output_paths == []
    [part] = result.content
    assert truncation_marker(None) in part.text
    assert _within(part.text, LIMITS)
    retained = [r for r in caplog.records if r.getMessage() == "managed tool output not retained"]
    assert retained and retained[0].tool == "produce" and retained[0].tool_call_id == "call_1"


async def test_large_image_passes_through_next_to_bounded_text(tmp_path):
    url = "data:image/png;base64," + base64.b64encode(os.urandom(6 * 1024 * 1024)).decode()
    image = FilePart(mime="image/png", url=url, filename="big.png")
    alone = await _settle(_registry(tmp_path, ToolOutput(content=[image])), tmp_path)
    assert alone.content == [image] and alone.output_paths == []
    mixed = await _settle(
        _registry(tmp_path, ToolOutput(content=[image, TextPart(text="z\n" * 4000)])), tmp_path
    )
    assert mixed.content[0] == image
    assert isinstance(mixed.content[1], TextPart) and _within(mixed.content[1].text, LIMITS)
    assert len(mixed.output_paths) == 1


async def test_structured_only_result_gets_json_preview_and_stays_unchanged(tmp_path):
    structured = {"rows": [{"n": i, "name": f"row {i}"} for i in range(3000)]}
    result = await _settle(_registry(tmp_path, ToolOutput(structured=structured)), tmp_path)
    assert result.structured == structured
    [part] = result.content
    assert isinstance(part, TextPart) and _within(part.text, LIMITS)
    assert part.text.startswith("{\n  ")
    [path] = result.output_paths
    assert '"name": "row 2999"' in _read(path)


async def test_tool_shaped_paths_survive_generic_bounding(tmp_path):
    own = str(tmp_path / "own-full-log.txt")
    output = ToolOutput(content=[TextPart(text="w\n" * 3000)], output_paths=[own])
    result = await _settle(_registry(tmp_path, output), tmp_path)
    assert result.output_paths[0] == own and len(result.output_paths) == 2


async def test_cancel_after_success_still_returns_bounded_settlement(tmp_path):
    env = ToolEnvironment(directory=str(tmp_path), data_dir=str(tmp_path / "data"))
    registry = ToolRegistry(env)
    got: list[object] = []
    with trio.CancelScope() as scope:

        async def finish(data: EchoInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
            await trio.lowlevel.checkpoint()
            scope.cancel()  # the interrupt lands right as the tool succeeds
            return ToolOutput(content=[TextPart(text="q\n" * 9000)])

        registry.contribute(
            Tool(name="finish", description="", input_type=EchoInput, handler=finish)
        )
        got.append(await registry.settle("finish", {"text": ""}, _ctx(tmp_path), agent=BUILD))
        await trio.lowlevel.checkpoint()  # the interrupt lands here, not inside settle
    assert scope.cancelled_caught
    [result] = got
    assert isinstance(result, ToolSuccess) and not result.lossy
    assert _within(result.content[0].text, LIMITS)
    assert _read(result.output_paths[0]) == "q\n" * 9000


def test_cleanup_removes_only_old_tool_files(tmp_path):
    now = 1_000_000_000.0
    week = 7 * 24 * 3600
    for name, age in [("tool_old", week + 60), ("tool_new", 60), ("notes_old", week + 60)]:
        path = tmp_path / name
        path.write_text(name)
        os.utime(path, (now - age, now - age))
    (tmp_path / "tool_dir_old").mkdir()
    os.utime(tmp_path / "tool_dir_old", (now - 2 * week, now - 2 * week))
    removed = cleanup_tool_output(str(tmp_path), now=now)
    assert removed == [str(tmp_path / "tool_old")]
    assert sorted(os.listdir(tmp_path)) == ["notes_old", "tool_dir_old", "tool_new"]
    assert cleanup_tool_output(str(tmp_path / "missing"), now=now) == []


async def test_cleanup_loop_sweeps_periodically(tmp_path):
    old = tmp_path / "tool_expired"
    started: list[trio.Event] = [trio.Event() for _ in range(4)]
    sweeps = 0

    def note_sweep() -> None:
        nonlocal sweeps
        if sweeps < len(started):
            started[sweeps].set()
        sweeps += 1

    def clock() -> float:  # read once at the start of every sweep, in its worker thread
        trio.from_thread.run_sync(note_sweep)
        return time.time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: run_tool_output_cleanup(str(tmp_path), every=0.01, retention=5, clock=clock)
        )
        with trio.fail_after(10):
            await started[1].wait()  # the first sweep is over (the second may be running)
            old.write_text("x")
            os.utime(old, (1, 1))
            await started[3].wait()  # the third sweep began after the file existed, and is over
        nursery.cancel_scope.cancel()
    assert not old.exists()


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(["a", "é", "€", "𝄞", "\n", " ", "漢"]), max_size=3000),
    max_lines=st.integers(min_value=1, max_value=60),
    max_bytes=st.integers(min_value=120, max_value=2000),
)
def test_preview_always_within_limits_on_character_boundaries(text, max_lines, max_bytes):
    limits = ToolOutputLimits(max_lines=max_lines, max_bytes=max_bytes)
    marker = truncation_marker("/d/tool-output/tool_0123456789abcdABCDEFGHIJKL")
    shown = preview(text, limits, marker)
    assert _within(shown, limits)
    if marker != shown:
        head, tail = shown.split(f"\n\n{marker}\n\n")
        assert text.startswith(head)
        assert text.endswith(tail)
        shown.encode("utf-8", errors="strict")
