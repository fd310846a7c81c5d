"""A session's tool I/O routed elsewhere (``ToolRegistry.route_io``): the file tools read and
write through the route's ``read_text``/``write_text``, the shell tool runs through its
``run_command``; other sessions, directories and binary files stay local."""

from __future__ import annotations

import subprocess

import pytest
import trio

from runtime.agents import BUILD
from runtime.llm import TextPart
from runtime.tools import (
    CommandResult,
    CommandRun,
    ToolContext,
    ToolEnvironment,
    ToolError,
    ToolIO,
    ToolSuccess,
    location_registry,
)


class Buffers:
    """An editor's view: open buffers by absolute path (unsaved text), commands run with
    bash and their output kept as one stream."""

    def __init__(self) -> None:
        self.text: dict[str, str] = {}
        self.reads: list[str] = []
        self.commands: list[CommandRun] = []
        self.contexts: list[ToolContext] = []

    async def read_text(self, ctx: ToolContext, path: str) -> str:
        self.reads.append(path)
        self.contexts.append(ctx)
        if path not in self.text:
            raise ToolError(f"no buffer for {path}")
        return self.text[path]

    async def write_text(self, ctx: ToolContext, path: str, content: str) -> None:
        self.contexts.append(ctx)
        self.text[path] = content

    async def run_command(self, ctx: ToolContext, run: CommandRun) -> CommandResult:
        self.commands.append(run)
        done = await trio.run_process(
            ["bash", "-c", run.command], cwd=run.cwd, capture_stdout=True,
            stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
        return CommandResult(output=done.stdout.decode(), exit_code=done.returncode)

    def io(self) -> ToolIO:
        return ToolIO(
            read_text=self.read_text, write_text=self.write_text, run_command=self.run_command
        )


def _ctx(tmp_path, session_id: str = "ses_1") -> ToolContext:
    return ToolContext(
        session_id=session_id, agent="build", assistant_message_id="msg_1",
        tool_call_id="call_1", directory=str(tmp_path / "loc"),
    )  # fmt: skip


@pytest.fixture
def registry(tmp_path):
    root = tmp_path / "loc"
    root.mkdir()
    (root / "notes.txt").write_text("on disk\n")
    (root / "blob.bin").write_bytes(b"\0\1\2")
    env = ToolEnvironment(directory=str(root), data_dir=str(tmp_path / "data"))
    return location_registry(env)


def _text(result) -> str:
    assert isinstance(result, ToolSuccess), result
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


async def test_the_file_tools_of_a_routed_session_use_its_buffers(tmp_path, registry) -> None:
    notes = str(tmp_path / "loc" / "notes.txt")
    buffers = Buffers()
    buffers.text[notes] = "unsaved line\n"
    with registry.route_io("ses_1", buffers.io()):
        read = await registry.settle("read", {"filePath": "notes.txt"}, _ctx(tmp_path), agent=BUILD)
        assert "1: unsaved line" in _text(read)
        edit = {"filePath": "notes.txt", "oldString": "unsaved", "newString": "edited"}
        edited = await registry.settle("edit", edit, _ctx(tmp_path), agent=BUILD)
        assert "1 replacement" in _text(edited)
        assert "+edited line" in edited.structured["diff"]
        write = {"filePath": "notes.txt", "content": "written\n"}
        wrote = await registry.settle("write", write, _ctx(tmp_path), agent=BUILD)
        assert wrote.structured["created"] is False and "-edited line" in wrote.structured["diff"]
        made = {"filePath": "new/made.txt", "content": "fresh\n"}
        created = await registry.settle("write", made, _ctx(tmp_path), agent=BUILD)
        assert created.structured["created"] is True
    assert buffers.text[notes] == "written\n"
    assert buffers.text[str(tmp_path / "loc" / "new" / "made.txt")] == "fresh\n"
    assert (tmp_path / "loc" / "notes.txt").read_text() == "on disk\n"  # the disk is untouched
    assert not (tmp_path / "loc" / "new").exists()
    assert {ctx.tool_call_id for ctx in buffers.contexts} == {"call_1"}
    # Out of the block, the session's tools are local again.
    after = await registry.settle("read", {"filePath": "notes.txt"}, _ctx(tmp_path), agent=BUILD)
    assert "1: on disk" in _text(after)


async def test_routing_is_per_session_and_leaves_directories_and_binaries_local(
    tmp_path, registry
) -> None:
    buffers = Buffers()
    with registry.route_io("ses_1", buffers.io()):
        other = await registry.settle(
            "read", {"filePath": "notes.txt"}, _ctx(tmp_path, "ses_2"), agent=BUILD
        )
        listing = await registry.settle("read", {"filePath": "."}, _ctx(tmp_path), agent=BUILD)
        binary = await registry.settle(
            "read", {"filePath": "blob.bin"}, _ctx(tmp_path), agent=BUILD
        )
        missing = await registry.settle(
            "read", {"filePath": "gone.txt"}, _ctx(tmp_path), agent=BUILD
        )
    assert "1: on disk" in _text(other)
    assert "notes.txt" in _text(listing)
    assert isinstance(binary, ToolSuccess) and binary.structured["bytes"] == 3
    assert missing.error == "File not found: gone.txt"
    assert buffers.reads == []


async def test_a_routed_failure_fails_the_call_with_its_message(tmp_path, registry) -> None:
    buffers = Buffers()  # no buffer for notes.txt: the route refuses
    with registry.route_io("ses_1", buffers.io()):
        read = await registry.settle("read", {"filePath": "notes.txt"}, _ctx(tmp_path), agent=BUILD)
    assert read.error.startswith("no buffer for ")


async def test_the_shell_tool_of_a_routed_session_runs_through_the_route(
    tmp_path, registry
) -> None:
    buffers = Buffers()
    (tmp_path / "loc" / "sub").mkdir()
    with registry.route_io("ses_1", buffers.io()):
        ran = await registry.settle(
            "shell", {"command": "pwd; echo oops >&2; exit 3", "workdir": "sub", "timeout": 5000},
            _ctx(tmp_path), agent=BUILD,
        )  # fmt: skip
    [run] = buffers.commands
    assert run.cwd == str(tmp_path / "loc" / "sub") and run.timeout == 5.0
    assert run.output_limit == 1024 * 1024
    text = _text(ran)
    assert text.startswith(str(tmp_path / "loc" / "sub")) and "oops" in text
    assert text.endswith("[exit code 3]")
    assert ran.structured == {
        "exit_code": 3, "timed_out": False, "signal": None, "output_truncated": False
    }  # fmt: skip


async def test_partial_routes_keep_the_rest_local(tmp_path, registry) -> None:
    buffers = Buffers()
    writes_only = ToolIO(write_text=buffers.write_text)
    notes = str(tmp_path / "loc" / "notes.txt")
    with registry.route_io("ses_1", writes_only):
        edit = {"filePath": "notes.txt", "oldString": "on disk", "newString": "in buffer"}
        edited = await registry.settle("edit", edit, _ctx(tmp_path), agent=BUILD)
        ran = await registry.settle(
            "shell", {"command": "cat notes.txt"}, _ctx(tmp_path), agent=BUILD
        )
    assert isinstance(edited, ToolSuccess)
    assert buffers.text[notes] == "in buffer\n" and buffers.reads == []
    assert "on disk" in _text(ran) and buffers.commands == []
