"""Durable records: prompts, session info, ``session.next.*`` events, projected messages.

Every field is named in Python snake case and travels on the wire in OpenCode's
spelling (``session_id`` -> ``sessionID``, ``time_created`` -> ``timeCreated``).
New fields get defaults and go last, so stored events stay decodable.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, UnsetType

from runtime._asks import (
    PermissionAsked,
    PermissionReplied,
    QuestionAsked,
    QuestionRejected,
    QuestionReplied,
)
from runtime._record import Event, Record
from runtime._revert_records import (
    FileBeforeImage,
    RevertCommitted,
    RevertInfo,
    SessionReverted,
    SessionUnreverted,
)

__all__ = [
    "AgentAttachment",
    "AgentSwitched",
    "CompactionEnded",
    "CompactionReason",
    "CompactionStarted",
    "ContextUpdated",
    "Delivery",
    "DurableEvent",
    "FileAttachment",
    "InputAdmitted",
    "InterruptRequested",
    "Location",
    "McpToolsFound",
    "ModelRef",
    "ModelSwitched",
    "Moved",
    "Prompt",
    "PromptAdmitted",
    "PromptPromoted",
    "ReasoningEnded",
    "ReasoningStarted",
    "ResumeNeeded",
    "RunError",
    "RunFailed",
    "SessionCreated",
    "SessionDeleted",
    "SessionError",
    "SessionInfo",
    "SessionTime",
    "SessionUpdated",
    "ShareInfo",
    "StepEnded",
    "StepFailed",
    "StepStarted",
    "Synthetic",
    "TextEnded",
    "TextStarted",
    "Todo",
    "TodoUpdated",
    "TokenCache",
    "TokenUsage",
    "ToolCalled",
    "ToolContent",
    "ToolFailed",
    "ToolFileContent",
    "ToolInputEnded",
    "ToolInputStarted",
    "ToolProvider",
    "ToolSuccess",
    "ToolTextContent",
    "ToolResultsPruned",
    "decode_event",
]

Delivery = Literal["steer", "queue"]
CompactionReason = Literal["auto", "manual"]


class ModelRef(Record, frozen=True):
    id: str
    provider_id: str
    variant: str | UnsetType = UNSET

    @classmethod
    def parse(cls, text: str | None) -> ModelRef | None:
        """``provider/model`` (as configuration and OpenCode's clients write it) as a
        ModelRef; None when either part is missing. The model id may contain ``/``."""
        provider, _, model_id = (text or "").partition("/")
        return cls(id=model_id, provider_id=provider) if provider and model_id else None


class Location(Record, frozen=True):
    directory: str
    workspace_id: str | UnsetType = UNSET


class FileAttachment(Record, frozen=True):
    uri: str
    mime: str
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


class AgentAttachment(Record, frozen=True):
    name: str


class Prompt(Record, frozen=True):
    text: str
    files: list[FileAttachment] = []
    agents: list[AgentAttachment] = []


class TokenCache(Record, frozen=True):
    read: int = 0
    write: int = 0


class TokenUsage(Record, frozen=True):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: TokenCache = TokenCache()


class SessionTime(Record, frozen=True):
    created: int
    updated: int


class RunError(Record, frozen=True):
    """Why a session's latest run failed: a tag (``StepLimitExceededError``,
    ``ProviderError``, ``ContextOverflowError``, ``ProviderAuthError``, ``InternalError``)
    and a message for people."""

    tag: str = msgspec.field(name="_tag")
    message: str


class ShareInfo(Record, frozen=True):
    """A session's read-only link (OpenCode's ``share``): ``url`` as the server gave it out,
    ``secret`` the unguessable part of it that opens the session (Kittiwake's)."""

    url: str
    secret: str


class SessionInfo(Record, frozen=True):
    """A session as clients see it (OpenCode's ``SessionV2Info``).

    ``needs_resume`` and ``last_error`` are Kittiwake's: a crash cut the session's work
    and it waits for an explicit resume; the failure that ended its latest run. The next
    provider turn of the session clears both.
    """

    id: str
    project_id: str
    location: Location
    title: str
    time: SessionTime
    parent_id: str | UnsetType = UNSET
    agent: str | UnsetType = UNSET
    model: ModelRef | UnsetType = UNSET
    cost: float = 0.0
    tokens: TokenUsage = TokenUsage()
    needs_resume: bool | UnsetType = UNSET
    """``True`` while the session needs a resume; left out otherwise (as is
    ``last_error`` when no run failed), so that a session in good order keeps OpenCode's
    exact shape."""
    last_error: RunError | UnsetType = UNSET
    revert: RevertInfo | UnsetType = UNSET
    """Where the session is rolled back to (OpenCode's ``revert``), while it is."""
    hidden: list[tuple[int, int]] | UnsetType = UNSET
    """Kittiwake's: the ``[from, to)`` seq ranges of messages a revert hides (``to`` is
    ``HIDDEN_OPEN`` while the revert stands) or a later prompt dropped for good."""
    share: ShareInfo | UnsetType = UNSET
    """The session's read-only link, while it is shared."""
    mcp_tools: list[str] | UnsetType = UNSET
    """Kittiwake's: the MCP tools ``mcp_search`` found for the session (sorted), offered
    to its model from then on while tool search stands in for the rest."""


class InputAdmitted(Record, frozen=True):
    """The receipt of one admitted prompt (OpenCode's ``SessionInputAdmitted``)."""

    admitted_seq: int
    id: str
    session_id: str
    prompt: Prompt
    delivery: Delivery
    time_created: int
    promoted_seq: int | UnsetType = UNSET


class SessionError(Record, frozen=True):
    message: str
    type: Literal["unknown"] = "unknown"


class ToolTextContent(Record, frozen=True, tag_field="type", tag="text"):
    text: str


class ToolFileContent(Record, frozen=True, tag_field="type", tag="file"):
    uri: str
    mime: str
    name: str | UnsetType = UNSET


ToolContent = ToolTextContent | ToolFileContent


class ToolProvider(Record, frozen=True):
    executed: bool = False
    metadata: dict[str, Any] | UnsetType = UNSET


class SessionCreated(Event, frozen=True, tag="session.created"):
    info: SessionInfo


class SessionDeleted(Event, frozen=True, tag="session.deleted"):
    """The session and everything it holds are gone; its projection removes every row,
    its stored events included (this one is journaled, so a catch-up removes them again)."""

    info: SessionInfo


class SessionUpdated(Event, frozen=True, tag="session.updated"):
    """The session's info changed outside a turn (its title, or its read-only link shared or
    unshared). ``info`` is the whole info after the change (OpenCode's ``session.updated``);
    the projection takes only the fields such a change may touch (``title``, ``share``)
    from it."""

    info: SessionInfo


class PromptAdmitted(Event, frozen=True, tag="session.next.prompt.admitted"):
    message_id: str
    prompt: Prompt
    delivery: Delivery


class PromptPromoted(Event, frozen=True, tag="session.next.prompt.promoted"):
    message_id: str
    prompt: Prompt
    time_created: int


class InterruptRequested(Event, frozen=True, tag="session.next.interrupt.requested"):
    pass


class ResumeNeeded(Event, frozen=True, tag="session.resume.needed"):
    """Recovery closed what a crash cut (or found a promoted prompt left unanswered): the
    session's work is ambiguous and waits for an explicit resume (``needs_resume``)."""


class RunFailed(Event, frozen=True, tag="session.run.failed"):
    """A run of the session failed; written with the ``session.next.step.failed`` that
    shows it in history, and kept in the session's ``last_error``."""

    error: RunError


class AgentSwitched(Event, frozen=True, tag="session.next.agent.switched"):
    message_id: str
    agent: str


class ModelSwitched(Event, frozen=True, tag="session.next.model.switched"):
    message_id: str
    model: ModelRef


class Moved(Event, frozen=True, tag="session.next.moved"):
    location: Location
    subdirectory: str | UnsetType = UNSET


class ContextUpdated(Event, frozen=True, tag="session.next.context.updated"):
    message_id: str
    text: str


class Synthetic(Event, frozen=True, tag="session.next.synthetic"):
    message_id: str
    text: str


class StepStarted(Event, frozen=True, tag="session.next.step.started"):
    assistant_message_id: str
    agent: str
    model: ModelRef


class StepEnded(Event, frozen=True, tag="session.next.step.ended"):
    VERSION: ClassVar[int] = 2
    assistant_message_id: str
    finish: str
    cost: float = 0.0
    tokens: TokenUsage = TokenUsage()


class StepFailed(Event, frozen=True, tag="session.next.step.failed"):
    VERSION: ClassVar[int] = 2
    assistant_message_id: str
    error: SessionError


class TextStarted(Event, frozen=True, tag="session.next.text.started"):
    assistant_message_id: str
    text_id: str


class TextEnded(Event, frozen=True, tag="session.next.text.ended"):
    assistant_message_id: str
    text_id: str
    text: str


class ReasoningStarted(Event, frozen=True, tag="session.next.reasoning.started"):
    assistant_message_id: str
    reasoning_id: str
    provider_metadata: dict[str, Any] | UnsetType = UNSET


class ReasoningEnded(Event, frozen=True, tag="session.next.reasoning.ended"):
    assistant_message_id: str
    reasoning_id: str
    text: str
    provider_metadata: dict[str, Any] | UnsetType = UNSET


class ToolInputStarted(Event, frozen=True, tag="session.next.tool.input.started"):
    assistant_message_id: str
    call_id: str
    name: str


class ToolInputEnded(Event, frozen=True, tag="session.next.tool.input.ended"):
    assistant_message_id: str
    call_id: str
    text: str


class ToolCalled(Event, frozen=True, tag="session.next.tool.called"):
    assistant_message_id: str
    call_id: str
    tool: str
    input: dict[str, Any]
    provider: ToolProvider = ToolProvider()


class ToolSuccess(Event, frozen=True, tag="session.next.tool.success"):
    assistant_message_id: str
    call_id: str
    structured: dict[str, Any] = {}
    content: list[ToolContent] = []
    output_paths: list[str] = []
    result: Any = UNSET
    provider: ToolProvider = ToolProvider()


class ToolFailed(Event, frozen=True, tag="session.next.tool.failed"):
    assistant_message_id: str
    call_id: str
    error: SessionError
    result: Any = UNSET
    provider: ToolProvider = ToolProvider()


class CompactionStarted(Event, frozen=True, tag="session.next.compaction.started"):
    """A compaction attempt began (``message_id`` names the checkpoint it would write).
    Alone it changes nothing: only its ``compaction.ended`` moves the history boundary."""

    message_id: str
    reason: CompactionReason


class CompactionEnded(Event, frozen=True, tag="session.next.compaction.ended"):
    """A compaction completed: the checkpoint's structured summary (``text``) and the
    serialized recent context (``recent``) replace every message up to ``boundary_seq``
    in the model-visible history. Projects the hidden compaction message."""

    VERSION: ClassVar[int] = 2
    LOCAL_FIELDS: ClassVar[tuple[str, ...]] = ("boundary_seq",)
    message_id: str
    reason: CompactionReason
    text: str
    recent: str
    boundary_seq: int = -1
    """The seq of the newest message the checkpoint replaces (Kittiwake's own)."""


class ToolResultsPruned(Event, frozen=True, tag="session.tool.results.pruned"):
    """Old local tool results left the model-visible history (``compaction.prune``):
    each ``(assistant message id, call id)`` now lowers as a short placeholder. The
    stored results stay in ``messages``; provider-executed results are never pruned."""

    calls: list[tuple[str, str]]


class Todo(Record, frozen=True):
    """One item of a session's todo list (OpenCode's ``Todo``)."""

    content: str
    status: Literal["pending", "in_progress", "completed", "cancelled"]
    priority: Literal["high", "medium", "low"]


class McpToolsFound(Event, frozen=True, tag="session.mcp.tools.found"):
    """``mcp_search`` found these MCP tools (their ids) for the session: they join its
    ``mcp_tools``, offered to its model from the next provider turn on."""

    tools: list[str]


class TodoUpdated(Event, frozen=True, tag="todo.updated"):
    """The session's whole todo list after a ``todowrite`` call."""

    todos: list[Todo]


DurableEvent = (
    SessionCreated
    | SessionDeleted
    | SessionUpdated
    | PromptAdmitted
    | PromptPromoted
    | InterruptRequested
    | ResumeNeeded
    | RunFailed
    | AgentSwitched
    | ModelSwitched
    | Moved
    | ContextUpdated
    | Synthetic
    | StepStarted
    | StepEnded
    | StepFailed
    | TextStarted
    | TextEnded
    | ReasoningStarted
    | ReasoningEnded
    | ToolInputStarted
    | ToolInputEnded
    | ToolCalled
    | ToolSuccess
    | ToolFailed
    | PermissionAsked
    | PermissionReplied
    | TodoUpdated
    | McpToolsFound
    | QuestionAsked
    | QuestionReplied
    | QuestionRejected
    | CompactionStarted
    | CompactionEnded
    | ToolResultsPruned
    | FileBeforeImage
    | SessionReverted
    | SessionUnreverted
    | RevertCommitted
)


@cache
def _event_decoder() -> msgspec.json.Decoder[DurableEvent]:
    return msgspec.json.Decoder(DurableEvent)


def decode_event(data: bytes | str) -> DurableEvent:
    """A stored event's JSON as its ``DurableEvent`` (the decoder is built on first use,
    which keeps its cost out of start-up). Raises ``msgspec.ValidationError``."""
    return _event_decoder().decode(data)
