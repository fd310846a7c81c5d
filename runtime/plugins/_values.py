"""The values the plugin SDK's hooks receive and return (``runtime.plugins._spec`` has the
hooks themselves). They are frozen: build a changed one with ``msgspec.structs.replace``.

Nothing here imports pluggy, so a Location without plugins never loads it.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from runtime.tools import Tool, ToolFailure, ToolOutput

__all__ = [
    "ChatInfo",
    "ChatMessage",
    "ChatParams",
    "CommandCall",
    "CompactionPrompt",
    "PROJECT_NAME",
    "PermissionAsk",
    "PluginEvent",
    "Refusal",
    "SessionRef",
    "ShellEnvInfo",
    "ToolCall",
    "ToolLike",
    "ToolResult",
]

PROJECT_NAME = "kittiwake"
"""pluggy's project name: the namespace every hook of the SDK is registered under."""

ToolResult: TypeAlias = ToolOutput | ToolFailure
"""A tool handler's outcome, before the registry bounds it."""
ToolLike: TypeAlias = Tool[Any] | Any
"""What the ``tool`` hook returns: ``Tool`` objects, or typed Python functions (async or
not; see ``runtime.plugins.plugin_tool``)."""


class SessionRef(msgspec.Struct, frozen=True, kw_only=True):
    """The session a hook is about, and its Location."""

    session_id: str
    directory: str


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call as the tool hooks see it: which tool, whose session, which agent (the
    effective agent of the provider turn that issued it), and the call's ids."""

    tool: str
    session_id: str
    agent: str
    call_id: str
    message_id: str
    directory: str


class Refusal(msgspec.Struct, frozen=True):
    """Returned by ``tool_execute_before`` to refuse a call: it fails with *reason* and
    nothing runs."""

    reason: str


class PermissionAsk(msgspec.Struct, frozen=True, kw_only=True):
    """A permission decision about to be made for *call*: *permission* on *resources*
    (paths relative to the Location, a command line, a URL, ...) and what the agent's
    rules decided (``allow`` or ``ask``; a configured ``deny`` is final and not asked
    about)."""

    call: ToolCall
    permission: str
    resources: list[str]
    status: Literal["allow", "ask"]


class ShellEnvInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A shell command about to run: its Location, its working directory, the session and
    call it runs for."""

    directory: str
    cwd: str
    session_id: str
    call_id: str


class ChatInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The provider turn a request is assembled for."""

    session_id: str
    directory: str
    agent: str
    provider_id: str
    model_id: str


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A user message about to be admitted: its session, its id, the Location, the agent
    and model its session's next provider turn would run with, and how it is delivered
    (``steer`` or ``queue``)."""

    session_id: str
    message_id: str
    directory: str
    agent: str
    provider_id: str
    model_id: str
    delivery: Literal["steer", "queue"]


class ChatParams(msgspec.Struct, frozen=True, kw_only=True):
    """Generation controls and provider options of one request (``None``: the provider's
    default)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    options: dict[str, Any] = {}


class CommandCall(msgspec.Struct, frozen=True, kw_only=True):
    """A command about to be admitted as a session's prompt."""

    command: str
    arguments: str
    session_id: str
    directory: str


class CompactionPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """What a compaction's summary request asks: *context* lines appended to the prompt, or
    *prompt* replacing it (``None``: the agent's or the built-in one)."""

    context: list[str] = []
    prompt: str | None = None


class PluginEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A committed event of a session (``session.next.*``, ``session.run.failed``,
    ``todo.updated``, ...): its type, session, sequence number and data as JSON values."""

    type: str
    session_id: str
    seq: int
    properties: dict[str, Any]
