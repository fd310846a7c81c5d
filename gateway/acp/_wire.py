"""The Agent Client Protocol's messages (protocol version 1, schema v1.19) as msgspec Structs.

Names follow the ACP schema (``agentclientprotocol/agent-client-protocol``,
``schema/v1/schema.json``); fields are snake case here and camel case on the wire.
Parameters the client sends are decoded leniently (unknown fields ignored, as the schema
allows ``_meta`` and later additions); what Kittiwake sends leaves out every optional
field it does not set. The tests check every message sent against the schema models of
the ``agent-client-protocol`` package.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = [
    "AUTH_REQUIRED",
    "AgentCapabilities",
    "AgentMessageChunk",
    "AgentThoughtChunk",
    "AuthCapabilities",
    "AuthMethod",
    "AuthenticateParams",
    "AvailableCommand",
    "AvailableCommandsUpdate",
    "CancelParams",
    "ClientCapabilities",
    "CommandInput",
    "ConfigOption",
    "ConfigOptionUpdate",
    "ConfigValue",
    "ContentBlock",
    "ContentToolContent",
    "Cost",
    "CreateTerminalParams",
    "CurrentModeUpdate",
    "DiffContent",
    "Empty",
    "EnvVariable",
    "FileSystemCapabilities",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "ImageBlock",
    "Implementation",
    "InitializeParams",
    "InitializeResult",
    "ListSessionsParams",
    "ListSessionsResult",
    "LogoutParams",
    "METHOD_NOT_FOUND",
    "McpCapabilities",
    "ModeState",
    "NewSessionParams",
    "Outgoing",
    "PARSE_ERROR",
    "PROTOCOL_VERSION",
    "PermissionOption",
    "PermissionToolCall",
    "PlanEntry",
    "PlanUpdate",
    "PromptCapabilities",
    "PromptParams",
    "PromptResult",
    "PromptUsage",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "ReadTextFileParams",
    "RequestPermissionParams",
    "ResourceBlock",
    "ResourceContents",
    "ResourceLinkBlock",
    "SessionCapabilities",
    "SessionConfigParams",
    "SessionIdParams",
    "SessionInfoItem",
    "SessionInfoUpdate",
    "SessionMode",
    "SessionResult",
    "SessionSetup",
    "SessionUpdate",
    "SessionUpdateParams",
    "SetConfigOptionParams",
    "SetModeParams",
    "StopReason",
    "TerminalContent",
    "TerminalParams",
    "TextBlock",
    "ToolCallContent",
    "ToolCallLocation",
    "ToolCallStart",
    "ToolCallUpdate",
    "ToolKind",
    "ToolStatus",
    "UsageUpdate",
    "UserMessageChunk",
    "WriteTextFileParams",
]

PROTOCOL_VERSION: Final = 1

# JSON-RPC 2.0's error codes, and ACP's own.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
AUTH_REQUIRED: Final = -32000
RESOURCE_NOT_FOUND: Final = -32002

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class _Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """What Kittiwake sends: camel case, optional fields left out unless set."""


class _In(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What a client sends: camel case, unknown fields (``_meta``, later ones) ignored."""


Outgoing = _Out
"""The base of what the room's other modules send (``_forms``)."""


# -- content ---------------------------------------------------------------------------------


class TextBlock(_Out, frozen=True, tag_field="type", tag="text"):
    text: str


class ImageBlock(_Out, frozen=True, tag_field="type", tag="image"):
    data: str
    mime_type: str
    uri: str | None = None


class AudioBlock(_Out, frozen=True, tag_field="type", tag="audio"):
    data: str
    mime_type: str


class ResourceLinkBlock(_Out, frozen=True, tag_field="type", tag="resource_link"):
    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None
    size: int | None = None


class ResourceContents(_Out, frozen=True):
    """An embedded resource: text (``text``) or binary (``blob``, base64)."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class ResourceBlock(_Out, frozen=True, tag_field="type", tag="resource"):
    resource: ResourceContents


ContentBlock: TypeAlias = TextBlock | ImageBlock | AudioBlock | ResourceLinkBlock | ResourceBlock


# -- initialize and authenticate ---------------------------------------------------------------


class FileSystemCapabilities(_In, frozen=True):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientCapabilities(_In, frozen=True):
    fs: FileSystemCapabilities = FileSystemCapabilities()
    terminal: bool = False
    elicitation: dict[str, Any] | None = None
    """The modes of ``elicitation/create`` the client renders (``{"form": {}}``)."""


class Implementation(_Out, frozen=True):
    name: str
    version: str
    title: str | None = None


class InitializeParams(_In, frozen=True):
    protocol_version: int
    client_capabilities: ClientCapabilities = ClientCapabilities()
    client_info: Implementation | None = None


class PromptCapabilities(_Out, frozen=True):
    image: bool = False
    audio: bool = False
    embedded_context: bool = False


class McpCapabilities(_Out, frozen=True):
    http: bool = False
    sse: bool = False


class Empty(_Out, frozen=True):
    """``{}``: a capability with nothing more to say."""


class SessionCapabilities(_Out, frozen=True):
    listing: Empty | None = msgspec.field(default=None, name="list")
    delete: Empty | None = None
    fork: Empty | None = None
    resume: Empty | None = None
    close: Empty | None = None


class AuthCapabilities(_Out, frozen=True):
    logout: Empty | None = None


class AgentCapabilities(_Out, frozen=True):
    load_session: bool = False
    prompt_capabilities: PromptCapabilities = PromptCapabilities()
    mcp_capabilities: McpCapabilities = McpCapabilities()
    session_capabilities: SessionCapabilities = SessionCapabilities()
    auth: AuthCapabilities = AuthCapabilities()


class AuthMethod(_Out, frozen=True):
    """An auth method the agent itself carries out (``authenticate`` with its id)."""

    id: str
    name: str
    description: str | None = None


class InitializeResult(_Out, frozen=True):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    auth_methods: list[AuthMethod]
    agent_info: Implementation


class AuthenticateParams(_In, frozen=True):
    method_id: str


class LogoutParams(_In, frozen=True):
    """``logout``: nothing but ``_meta``."""


# -- sessions ----------------------------------------------------------------------------------


class NewSessionParams(_In, frozen=True):
    cwd: str
    mcp_servers: list[Any] = []


class SessionSetup(_In, frozen=True):
    """``session/load``, ``session/resume`` and ``session/fork``: a session in a directory."""

    session_id: str
    cwd: str
    mcp_servers: list[Any] = []


class SessionIdParams(_In, frozen=True):
    """``session/close``, ``session/delete`` and ``session/cancel``."""

    session_id: str


CancelParams: TypeAlias = SessionIdParams


class ListSessionsParams(_In, frozen=True):
    cwd: str | None = None
    cursor: str | None = None


class SessionInfoItem(_Out, frozen=True):
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None


class ListSessionsResult(_Out, frozen=True):
    sessions: list[SessionInfoItem]
    next_cursor: str | None = None


class SessionMode(_Out, frozen=True):
    id: str
    name: str
    description: str | None = None


class ModeState(_Out, frozen=True):
    current_mode_id: str
    available_modes: list[SessionMode]


class ConfigValue(_Out, frozen=True):
    value: str
    name: str
    description: str | None = None


class ConfigOption(_Out, frozen=True, tag_field="type", tag="select"):
    id: str
    name: str
    current_value: str
    options: list[ConfigValue]
    category: str | None = None
    description: str | None = None


class SessionResult(_Out, frozen=True):
    """What ``session/new``, ``session/load``, ``session/resume`` and ``session/fork``
    answer: the session's id (new and fork only), its modes and configuration options."""

    session_id: str | None = None
    modes: ModeState | None = None
    config_options: list[ConfigOption] | None = None


class SessionConfigParams(_Out, frozen=True):
    """``session/set_config_option``'s answer: every option as it now is."""

    config_options: list[ConfigOption]


class SetModeParams(_In, frozen=True):
    session_id: str
    mode_id: str


class SetConfigOptionParams(_In, frozen=True):
    session_id: str
    config_id: str
    value: str | bool


class PromptParams(_In, frozen=True):
    session_id: str
    prompt: list[ContentBlock]


class PromptUsage(_Out, frozen=True):
    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None


class PromptResult(_Out, frozen=True):
    stop_reason: StopReason
    usage: PromptUsage | None = None


# -- session updates ---------------------------------------------------------------------------


class ContentToolContent(_Out, frozen=True, tag_field="type", tag="content"):
    content: ContentBlock


class DiffContent(_Out, frozen=True, tag_field="type", tag="diff"):
    path: str
    new_text: str
    old_text: str | None = None


class TerminalContent(_Out, frozen=True, tag_field="type", tag="terminal"):
    terminal_id: str


ToolCallContent: TypeAlias = ContentToolContent | DiffContent | TerminalContent


class ToolCallLocation(_Out, frozen=True):
    path: str
    line: int | None = None


class _Chunk(_Out, frozen=True):
    content: ContentBlock
    message_id: str | None = None


class UserMessageChunk(_Chunk, frozen=True, tag_field="sessionUpdate", tag="user_message_chunk"):
    pass


class AgentMessageChunk(_Chunk, frozen=True, tag_field="sessionUpdate", tag="agent_message_chunk"):
    pass


class AgentThoughtChunk(_Chunk, frozen=True, tag_field="sessionUpdate", tag="agent_thought_chunk"):
    pass


class ToolCallStart(_Out, frozen=True, tag_field="sessionUpdate", tag="tool_call"):
    tool_call_id: str
    title: str
    kind: ToolKind | None = None
    status: ToolStatus | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None


class ToolCallUpdate(_Out, frozen=True, tag_field="sessionUpdate", tag="tool_call_update"):
    tool_call_id: str
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolStatus | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None


class PlanEntry(_Out, frozen=True):
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


class PlanUpdate(_Out, frozen=True, tag_field="sessionUpdate", tag="plan"):
    entries: list[PlanEntry]


class CommandInput(_Out, frozen=True):
    hint: str


class AvailableCommand(_Out, frozen=True):
    name: str
    description: str
    input: CommandInput | None = None


class AvailableCommandsUpdate(
    _Out, frozen=True, tag_field="sessionUpdate", tag="available_commands_update"
):
    available_commands: list[AvailableCommand]


class CurrentModeUpdate(_Out, frozen=True, tag_field="sessionUpdate", tag="current_mode_update"):
    current_mode_id: str


class ConfigOptionUpdate(_Out, frozen=True, tag_field="sessionUpdate", tag="config_option_update"):
    config_options: list[ConfigOption]


class SessionInfoUpdate(_Out, frozen=True, tag_field="sessionUpdate", tag="session_info_update"):
    title: str | None = None
    updated_at: str | None = None


class Cost(_Out, frozen=True):
    amount: float
    currency: str


class UsageUpdate(_Out, frozen=True, tag_field="sessionUpdate", tag="usage_update"):
    used: int
    size: int
    cost: Cost | None = None


SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallUpdate
    | PlanUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
)


class SessionUpdateParams(_Out, frozen=True):
    session_id: str
    update: SessionUpdate


# -- what the agent asks of the client -------------------------------------------------------


class PermissionOption(_Out, frozen=True):
    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionToolCall(_Out, frozen=True):
    """The tool call a permission request is for (the schema's ``ToolCallUpdate``)."""

    tool_call_id: str
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolStatus | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None


class RequestPermissionParams(_Out, frozen=True):
    session_id: str
    tool_call: PermissionToolCall
    options: list[PermissionOption]


class ReadTextFileParams(_Out, frozen=True):
    session_id: str
    path: str
    line: int | None = None
    limit: int | None = None


class WriteTextFileParams(_Out, frozen=True):
    session_id: str
    path: str
    content: str


class EnvVariable(_Out, frozen=True):
    name: str
    value: str


class CreateTerminalParams(_Out, frozen=True):
    session_id: str
    command: str
    args: list[str] | None = None
    env: list[EnvVariable] | None = None
    cwd: str | None = None
    output_byte_limit: int | None = None


class TerminalParams(_Out, frozen=True):
    """``terminal/output``, ``wait_for_exit``, ``kill`` and ``release``."""

    session_id: str
    terminal_id: str
