"""Projected session messages, in OpenCode's ``SessionMessage`` shapes."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType

from runtime._schema import (
    AgentAttachment,
    CompactionReason,
    FileAttachment,
    ModelRef,
    Record,
    SessionError,
    TokenUsage,
    ToolContent,
)

__all__ = [
    "AgentSwitchedMessage",
    "AssistantContent",
    "AssistantMessage",
    "AssistantReasoning",
    "AssistantText",
    "AssistantTool",
    "CompactionMessage",
    "CompactionMetadata",
    "MessageTime",
    "ModelSwitchedMessage",
    "SessionMessage",
    "SyntheticMessage",
    "SystemMessage",
    "ToolCompleted",
    "ToolError",
    "ToolPending",
    "ToolRunning",
    "ToolState",
    "ToolTime",
    "UserMessage",
]


class MessageTime(Record, frozen=True):
    created: int
    completed: int | UnsetType = UNSET


class _Message(Record, frozen=True, tag_field="type"):
    id: str
    time: MessageTime


class UserMessage(_Message, frozen=True, tag="user"):
    text: str
    files: list[FileAttachment] = []
    agents: list[AgentAttachment] = []


class SyntheticMessage(_Message, frozen=True, tag="synthetic"):
    session_id: str
    text: str


class SystemMessage(_Message, frozen=True, tag="system"):
    """A Mid-Conversation System Message: the exact text shown to the model."""

    text: str


class CompactionMetadata(Record, frozen=True):
    """Kittiwake's own facts about a checkpoint: the seq of the newest message it replaces."""

    boundary_seq: int


class CompactionMessage(_Message, frozen=True, tag="compaction"):
    """The hidden checkpoint a completed compaction projects: a structured rolling summary
    and the serialized recent context. The model-visible history starts with it; every
    message up to ``metadata.boundary_seq`` stays durable but leaves that history."""

    reason: CompactionReason
    summary: str
    recent: str
    metadata: CompactionMetadata


class AgentSwitchedMessage(_Message, frozen=True, tag="agent-switched"):
    agent: str


class ModelSwitchedMessage(_Message, frozen=True, tag="model-switched"):
    model: ModelRef


class AssistantText(Record, frozen=True, tag_field="type", tag="text"):
    id: str
    text: str


class AssistantReasoning(Record, frozen=True, tag_field="type", tag="reasoning"):
    id: str
    text: str
    provider_metadata: dict[str, Any] | UnsetType = UNSET


class ToolPending(Record, frozen=True, tag_field="status", tag="pending"):
    input: str


class ToolRunning(Record, frozen=True, tag_field="status", tag="running"):
    input: dict[str, Any]
    structured: dict[str, Any] = {}
    content: list[ToolContent] = []


class ToolCompleted(Record, frozen=True, tag_field="status", tag="completed"):
    input: dict[str, Any]
    content: list[ToolContent]
    structured: dict[str, Any]
    output_paths: list[str] = []
    result: Any = UNSET


class ToolError(Record, frozen=True, tag_field="status", tag="error"):
    input: dict[str, Any]
    content: list[ToolContent]
    structured: dict[str, Any]
    error: SessionError
    result: Any = UNSET


ToolState = ToolPending | ToolRunning | ToolCompleted | ToolError


class ToolProviderInfo(Record, frozen=True):
    executed: bool = False
    metadata: dict[str, Any] | UnsetType = UNSET


class ToolTime(Record, frozen=True):
    created: int
    ran: int | UnsetType = UNSET
    completed: int | UnsetType = UNSET
    pruned: int | UnsetType = UNSET
    """When ``compaction.prune`` took the result out of the model-visible history."""


class AssistantTool(Record, frozen=True, tag_field="type", tag="tool"):
    id: str
    name: str
    state: ToolState
    time: ToolTime
    provider: ToolProviderInfo | UnsetType = UNSET


AssistantContent = AssistantText | AssistantReasoning | AssistantTool


class AssistantMessage(_Message, frozen=True, tag="assistant"):
    agent: str
    model: ModelRef
    content: list[AssistantContent] = []
    finish: str | UnsetType = UNSET
    cost: float | UnsetType = UNSET
    tokens: TokenUsage | UnsetType = UNSET
    error: SessionError | UnsetType = UNSET


SessionMessage = (
    UserMessage
    | CompactionMessage
    | SyntheticMessage
    | SystemMessage
    | AgentSwitchedMessage
    | ModelSwitchedMessage
    | AssistantMessage
)
