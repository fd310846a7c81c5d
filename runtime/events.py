"""The durable event and live delta schema of a session, and the records inside it.

Every event is a frozen msgspec Struct tagged by its OpenCode wire ``type``;
:func:`decode_event` reads one back from its stored JSON.
"""

from runtime._asks import PermissionAsked as PermissionAsked
from runtime._asks import PermissionInfo as PermissionInfo
from runtime._asks import PermissionReplied as PermissionReplied
from runtime._asks import QuestionAsked as QuestionAsked
from runtime._asks import QuestionInfo as QuestionInfo
from runtime._asks import QuestionOption as QuestionOption
from runtime._asks import QuestionRejected as QuestionRejected
from runtime._asks import QuestionReplied as QuestionReplied
from runtime._asks import QuestionTool as QuestionTool
from runtime._live import CompactionDelta as CompactionDelta
from runtime._live import LiveDelta as LiveDelta
from runtime._live import ReasoningDelta as ReasoningDelta
from runtime._live import Retried as Retried
from runtime._live import RetryError as RetryError
from runtime._live import TextDelta as TextDelta
from runtime._live import ToolInputDelta as ToolInputDelta
from runtime._live import ToolOutputDelta as ToolOutputDelta
from runtime._record import wire_name as wire_name
from runtime._revert_records import FileBeforeImage as FileBeforeImage
from runtime._revert_records import FileImage as FileImage
from runtime._revert_records import RevertCommitted as RevertCommitted
from runtime._revert_records import RevertInfo as RevertInfo
from runtime._revert_records import SessionReverted as SessionReverted
from runtime._revert_records import SessionUnreverted as SessionUnreverted
from runtime._schema import AgentAttachment as AgentAttachment
from runtime._schema import AgentSwitched as AgentSwitched
from runtime._schema import CompactionEnded as CompactionEnded
from runtime._schema import CompactionReason as CompactionReason
from runtime._schema import CompactionStarted as CompactionStarted
from runtime._schema import ContextUpdated as ContextUpdated
from runtime._schema import Delivery as Delivery
from runtime._schema import DurableEvent as DurableEvent
from runtime._schema import FileAttachment as FileAttachment
from runtime._schema import InputAdmitted as InputAdmitted
from runtime._schema import InterruptRequested as InterruptRequested
from runtime._schema import Location as Location
from runtime._schema import McpToolsFound as McpToolsFound
from runtime._schema import ModelRef as ModelRef
from runtime._schema import ModelSwitched as ModelSwitched
from runtime._schema import Moved as Moved
from runtime._schema import Prompt as Prompt
from runtime._schema import PromptAdmitted as PromptAdmitted
from runtime._schema import PromptPromoted as PromptPromoted
from runtime._schema import ReasoningEnded as ReasoningEnded
from runtime._schema import ReasoningStarted as ReasoningStarted
from runtime._schema import ResumeNeeded as ResumeNeeded
from runtime._schema import RunError as RunError
from runtime._schema import RunFailed as RunFailed
from runtime._schema import SessionCreated as SessionCreated
from runtime._schema import SessionDeleted as SessionDeleted
from runtime._schema import SessionError as SessionError
from runtime._schema import SessionInfo as SessionInfo
from runtime._schema import SessionTime as SessionTime
from runtime._schema import SessionUpdated as SessionUpdated
from runtime._schema import ShareInfo as ShareInfo
from runtime._schema import StepEnded as StepEnded
from runtime._schema import StepFailed as StepFailed
from runtime._schema import StepStarted as StepStarted
from runtime._schema import Synthetic as Synthetic
from runtime._schema import TextEnded as TextEnded
from runtime._schema import TextStarted as TextStarted
from runtime._schema import Todo as Todo
from runtime._schema import TodoUpdated as TodoUpdated
from runtime._schema import TokenCache as TokenCache
from runtime._schema import TokenUsage as TokenUsage
from runtime._schema import ToolCalled as ToolCalled
from runtime._schema import ToolContent as ToolContent
from runtime._schema import ToolFailed as ToolFailed
from runtime._schema import ToolFileContent as ToolFileContent
from runtime._schema import ToolInputEnded as ToolInputEnded
from runtime._schema import ToolInputStarted as ToolInputStarted
from runtime._schema import ToolProvider as ToolProvider
from runtime._schema import ToolResultsPruned as ToolResultsPruned
from runtime._schema import ToolSuccess as ToolSuccess
from runtime._schema import ToolTextContent as ToolTextContent
from runtime._schema import decode_event as decode_event

__all__ = [
    "AgentAttachment",
    "AgentSwitched",
    "CompactionDelta",
    "CompactionEnded",
    "CompactionReason",
    "CompactionStarted",
    "ContextUpdated",
    "Delivery",
    "DurableEvent",
    "FileAttachment",
    "FileBeforeImage",
    "FileImage",
    "InputAdmitted",
    "InterruptRequested",
    "LiveDelta",
    "Location",
    "McpToolsFound",
    "ModelRef",
    "ModelSwitched",
    "Moved",
    "PermissionAsked",
    "PermissionInfo",
    "PermissionReplied",
    "Prompt",
    "PromptAdmitted",
    "PromptPromoted",
    "QuestionAsked",
    "QuestionInfo",
    "QuestionOption",
    "QuestionRejected",
    "QuestionReplied",
    "QuestionTool",
    "ReasoningDelta",
    "ReasoningEnded",
    "ReasoningStarted",
    "ResumeNeeded",
    "Retried",
    "RetryError",
    "RevertCommitted",
    "RevertInfo",
    "RunError",
    "RunFailed",
    "SessionCreated",
    "SessionDeleted",
    "SessionError",
    "SessionInfo",
    "SessionReverted",
    "SessionTime",
    "SessionUnreverted",
    "SessionUpdated",
    "ShareInfo",
    "StepEnded",
    "StepFailed",
    "StepStarted",
    "Synthetic",
    "TextDelta",
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
    "ToolInputDelta",
    "ToolInputEnded",
    "ToolInputStarted",
    "ToolOutputDelta",
    "ToolProvider",
    "ToolResultsPruned",
    "ToolSuccess",
    "ToolTextContent",
    "decode_event",
    "wire_name",
]
