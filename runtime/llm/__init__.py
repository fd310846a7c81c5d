"""Provider-neutral LLM streaming: schemas, protocol adapters, catalog, auth, retries.

Standalone: imports nothing else from this repository.
"""

from ._client import LLMClient as LLMClient
from ._events import ErrorKind as ErrorKind
from ._events import HostedToolResult as HostedToolResult
from ._events import LLMEvent as LLMEvent
from ._events import ProviderError as ProviderError
from ._events import ReasoningDelta as ReasoningDelta
from ._events import ReasoningEnd as ReasoningEnd
from ._events import ReasoningStart as ReasoningStart
from ._events import StepFinish as StepFinish
from ._events import StepStart as StepStart
from ._events import TextDelta as TextDelta
from ._events import TextEnd as TextEnd
from ._events import TextStart as TextStart
from ._events import ToolCall as ToolCall
from ._events import ToolInputDelta as ToolInputDelta
from ._events import ToolInputEnd as ToolInputEnd
from ._events import ToolInputStart as ToolInputStart
from ._schema import AssistantMessage as AssistantMessage
from ._schema import FilePart as FilePart
from ._schema import GenerationControls as GenerationControls
from ._schema import LLMRequest as LLMRequest
from ._schema import Message as Message
from ._schema import ModelRef as ModelRef
from ._schema import ReasoningPart as ReasoningPart
from ._schema import SystemMessage as SystemMessage
from ._schema import TextPart as TextPart
from ._schema import ToolCallPart as ToolCallPart
from ._schema import ToolDefinition as ToolDefinition
from ._schema import ToolMessage as ToolMessage
from ._schema import ToolResultPart as ToolResultPart
from ._schema import Usage as Usage
from ._schema import UserMessage as UserMessage
from ._scripted import ScriptedLLM as ScriptedLLM
from ._scripted import ScriptExhaustedError as ScriptExhaustedError

__all__ = [
    "AssistantMessage",
    "ErrorKind",
    "FilePart",
    "GenerationControls",
    "HostedToolResult",
    "LLMClient",
    "LLMEvent",
    "LLMRequest",
    "Message",
    "ModelRef",
    "ProviderError",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningPart",
    "ReasoningStart",
    "ScriptExhaustedError",
    "ScriptedLLM",
    "StepFinish",
    "StepStart",
    "SystemMessage",
    "TextDelta",
    "TextEnd",
    "TextPart",
    "TextStart",
    "ToolCall",
    "ToolCallPart",
    "ToolDefinition",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
    "ToolMessage",
    "ToolResultPart",
    "Usage",
    "UserMessage",
]
