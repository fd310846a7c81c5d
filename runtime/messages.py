"""Session History messages: what projecting a session's durable events yields."""

from runtime._messages import AgentSwitchedMessage as AgentSwitchedMessage
from runtime._messages import AssistantContent as AssistantContent
from runtime._messages import AssistantMessage as AssistantMessage
from runtime._messages import AssistantReasoning as AssistantReasoning
from runtime._messages import AssistantText as AssistantText
from runtime._messages import AssistantTool as AssistantTool
from runtime._messages import CompactionMessage as CompactionMessage
from runtime._messages import CompactionMetadata as CompactionMetadata
from runtime._messages import MessageTime as MessageTime
from runtime._messages import ModelSwitchedMessage as ModelSwitchedMessage
from runtime._messages import SessionMessage as SessionMessage
from runtime._messages import SyntheticMessage as SyntheticMessage
from runtime._messages import SystemMessage as SystemMessage
from runtime._messages import ToolCompleted as ToolCompleted
from runtime._messages import ToolError as ToolError
from runtime._messages import ToolPending as ToolPending
from runtime._messages import ToolRunning as ToolRunning
from runtime._messages import ToolState as ToolState
from runtime._messages import ToolTime as ToolTime
from runtime._messages import UserMessage as UserMessage

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
