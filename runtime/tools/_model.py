"""Tool execution values: call context, environment, handler output and settlements."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeAlias

import msgspec

from runtime import IdGenerator
from runtime.llm import FilePart, TextPart

__all__ = [
    "CommandResult",
    "CommandRun",
    "ContentPart",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "ToolContext",
    "ToolEnvironment",
    "ToolError",
    "ToolFailure",
    "ToolIO",
    "ToolOutput",
    "ToolOutputLimits",
    "ToolSettlement",
    "ToolSuccess",
]

DEFAULT_MAX_LINES: Final = 2000
DEFAULT_MAX_BYTES: Final = 51200

ContentPart: TypeAlias = TextPart | FilePart


class CommandRun(msgspec.Struct, frozen=True, kw_only=True):
    """One shell command as a ``ToolIO`` runs it: the bash command line, its working
    directory (absolute, inside the Location), the seconds it may run and the bytes of its
    output to keep (the last ones)."""

    command: str
    cwd: str
    timeout: float
    output_limit: int


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """How a command a ``ToolIO`` ran ended: its output (stdout and stderr as one stream),
    whether earlier output was dropped, its exit code or the signal that ended it, and
    whether it was stopped for running past its timeout."""

    output: str
    exit_code: int | None = None
    signal: str | None = None
    truncated: bool = False
    timed_out: bool = False


class ToolIO(msgspec.Struct, frozen=True, kw_only=True):
    """Where one session's file tools read and write text files and its shell tool runs
    commands when that is not this process's file system and a local bash: an editor's
    buffers and terminals (``kittiwake acp``). A ``None`` member is done here as usual.

    Paths are absolute and already confined to the Location. Each member may raise
    ``ToolError`` (the call fails with its message); cancellation must stop what it
    started (a command is killed) before it propagates.
    """

    read_text: Callable[[ToolContext, str], Awaitable[str]] | None = None
    write_text: Callable[[ToolContext, str, str], Awaitable[None]] | None = None
    run_command: Callable[[ToolContext, CommandRun], Awaitable[CommandResult]] | None = None


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """Who is calling: the session, the effective agent of the issuing provider turn,
    the assistant message holding the call, and the call's id; ``io``, where the call's
    file and shell work goes when the session's is routed (``ToolRegistry.route_io``)."""

    session_id: str
    agent: str
    assistant_message_id: str
    tool_call_id: str
    directory: str
    io: ToolIO | None = None


class ToolOutputLimits(msgspec.Struct, frozen=True, kw_only=True):
    """One aggregate Model Tool Output limit per settlement (config ``tool_output``)."""

    max_lines: int = DEFAULT_MAX_LINES
    max_bytes: int = DEFAULT_MAX_BYTES


class ToolEnvironment(msgspec.Struct, frozen=True, kw_only=True):
    """What a Location gives its tools.

    ``offload_io`` runs blocking file work in worker threads; deterministic
    simulations turn it off so no thread lets an autojump clock run ahead.
    """

    directory: str
    data_dir: str
    limits: ToolOutputLimits = ToolOutputLimits()
    clock: Callable[[], float] = time.time
    ids: IdGenerator = msgspec.field(default_factory=IdGenerator)
    project: str = ""
    offload_io: bool = True
    settle_timeout: float = 30.0
    before_image_max_bytes: int = 1024 * 1024
    """A file larger than this is not kept before a file tool changes it: its image is
    recorded as omitted and revert leaves that file as it is."""
    diff_max_bytes: int = 16 * 1024
    """The longest diff ``edit`` and ``write`` put in their structured result (``diff``); a
    longer one is left out (the structured result goes to the model with the text), as is
    the diff of a file larger than ``before_image_max_bytes``."""

    @property
    def tool_output_dir(self) -> str:
        """The flat Managed Tool Output File directory, ``<data dir>/tool-output``."""
        return f"{self.data_dir.rstrip('/')}/tool-output"

    @property
    def project_key(self) -> str:
        """The key saved approvals are filed under (the project, else the Location)."""
        return self.project or self.directory


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a handler returns on success, before the registry bounds it.

    ``output_paths`` are files the tool already manages for its own shaped
    output; they survive generic bounding.
    """

    content: list[ContentPart] = []
    structured: Any = None
    output_paths: list[str] = []


class ToolSuccess(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="success"):
    """A bounded successful settlement (the Model Tool Output).

    ``lossy`` means the text was truncated and the complete text could not be
    retained, so no path names it.
    """

    content: list[ContentPart]
    structured: Any = None
    output_paths: list[str] = []
    lossy: bool = False


class ToolFailure(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="failed"):
    """A failed settlement: the message the model sees, plus optional parts."""

    error: str
    content: list[ContentPart] = []
    structured: Any = None


ToolSettlement: TypeAlias = ToolSuccess | ToolFailure


class ToolError(Exception):
    """Raised by a handler to fail its call with exactly this message (and, optionally,
    a structured value such as a partial-application report)."""

    def __init__(self, message: str, *, structured: Any = None) -> None:
        super().__init__(message)
        self.structured = structured
