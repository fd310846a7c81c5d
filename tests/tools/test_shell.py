import os
import signal
import uuid

import trio
import trio.testing

from runtime.agents import BUILD
from runtime.tools import (
    ShellLimits,
    ToolContext,
    ToolEnvironment,
    ToolFailure,
    ToolRegistry,
    ToolSuccess,
    shell_tool,
)


def _registry(tmp_path, limits: ShellLimits | None = None) -> ToolRegistry:
    env = ToolEnvironment(directory=str(tmp_path), data_dir=str(tmp_path / "data"))
    registry = ToolRegistry(env)
    registry.contribute(shell_tool(limits))
    return registry


def _ctx(tmp_path) -> ToolContext:
    return ToolContext(
        session_id="ses_1",
        agent="build",
        assistant_message_id="msg_1",
        tool_call_id="call_1",
        directory=str(tmp_path),
    )


async def _run(tmp_path, args, limits=None) -> ToolSuccess:
    result = await _registry(tmp_path, limits).settle("shell", args, _ctx(tmp_path), agent=BUILD)
    assert isinstance(result, ToolSuccess), result
    return result


def _processes_with(marker: str) -> dict[int, str]:
    """Live (non-zombie) processes whose command line contains *marker*, with their state."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0].decode()
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found[int(pid)] = state
    return found


def _unique_sleep() -> str:
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


async def test_reports_exit_code_and_both_streams(tmp_path):
    result = await _run(tmp_path, {"command": "echo out; echo err >&2; pwd; exit 3"})
    text = result.content[0].text
    assert text == f"out\n{tmp_path}\n[stderr]\nerr\n[exit code 3]"
    assert result.structured["exit_code"] == 3 and result.structured["timed_out"] is False


async def test_workdir_is_relative_to_the_location(tmp_path):
    (tmp_path / "sub").mkdir()
    result = await _run(tmp_path, {"command": "pwd", "workdir": "sub"})
    assert result.content[0].text.startswith(str(tmp_path / "sub"))
    refused = await _registry(tmp_path).settle(
        "shell", {"command": "pwd", "workdir": ".."}, _ctx(tmp_path), agent=BUILD
    )
    assert isinstance(refused, ToolFailure) and "escapes the Location" in refused.error


async def test_timeout_kills_the_command_and_says_so(tmp_path):
    marker = _unique_sleep()
    start = trio.current_time()
    result = await _run(tmp_path, {"command": f"sleep {marker}", "timeout": 300})
    assert trio.current_time() - start < 5
    assert "Command timed out after 0.3 s" in result.content[0].text
    assert result.structured["timed_out"] is True
    assert _processes_with(marker) == {}


async def test_capture_keeps_the_last_bytes_of_each_stream(tmp_path):
    limits = ShellLimits(max_capture_bytes=1000)
    result = await _run(tmp_path, {"command": "head -c 5000 /dev/zero | tr '\\0' a"}, limits)
    assert result.structured["stdout_dropped_bytes"] == 4000
    assert result.content[0].text.startswith("[4000 earlier bytes dropped]\n" + "a" * 1000)


async def test_interrupt_kills_the_whole_process_group(tmp_path):
    marker = _unique_sleep()
    registry = _registry(tmp_path)
    command = f"sleep {marker} & sleep {marker} & (sleep {marker}; echo) ; wait"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: registry.settle("shell", {"command": command}, _ctx(tmp_path), agent=BUILD)
        )
        for _ in range(500):
            if len(_processes_with(marker)) >= 3:
                break
            await trio.sleep(0.01)
        children = _processes_with(marker)
        assert len(children) >= 3
        nursery.cancel_scope.cancel()
    assert _processes_with(marker) == {}
    assert registry.statistics().in_flight == 0


async def test_background_child_holding_the_pipe_does_not_hang_the_call(tmp_path):
    marker = _unique_sleep()
    start = trio.current_time()
    result = await _run(tmp_path, {"command": f"sleep {marker} & echo started"})
    try:
        assert trio.current_time() - start < 5
        assert result.content[0].text == "started\n[exit code 0]"
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)
