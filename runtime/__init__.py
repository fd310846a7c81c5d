"""Kittiwake's domain logic: ids, schemas, projection, inbox rules, context, tools.

Nothing here imports ``actors``, ``storage`` or ``gateway``; ``open_runtime`` is
re-exported lazily from ``actors`` so embedding programs need one import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime._errors import InvalidInputError as InvalidInputError
from runtime._errors import InvalidSessionInputError as InvalidSessionInputError
from runtime._errors import KittiwakeError as KittiwakeError
from runtime._errors import OperationUnavailableError as OperationUnavailableError
from runtime._errors import PromptConflictError as PromptConflictError
from runtime._errors import QuestionNotFoundError as QuestionNotFoundError
from runtime._errors import ResumeNotNeededError as ResumeNotNeededError
from runtime._errors import SessionNotFoundError as SessionNotFoundError
from runtime._errors import StorageError as StorageError
from runtime._ids import ID_PATTERNS as ID_PATTERNS
from runtime._ids import IdGenerator as IdGenerator
from runtime._ids import IdPrefix as IdPrefix
from runtime._ids import derived_id as derived_id
from runtime._ids import is_valid_id as is_valid_id
from runtime._lazy import lazy_attribute as lazy_attribute
from runtime._live import LiveDelta as LiveDelta
from runtime._messages import AssistantMessage as AssistantMessage
from runtime._messages import SessionMessage as SessionMessage
from runtime._messages import SystemMessage as SystemMessage
from runtime._messages import UserMessage as UserMessage
from runtime._schema import Delivery as Delivery
from runtime._schema import DurableEvent as DurableEvent
from runtime._schema import InputAdmitted as InputAdmitted
from runtime._schema import Location as Location
from runtime._schema import ModelRef as ModelRef
from runtime._schema import Prompt as Prompt
from runtime._schema import SessionInfo as SessionInfo

if TYPE_CHECKING:
    from actors import open_runtime as open_runtime

__all__ = [
    "ID_PATTERNS",
    "AssistantMessage",
    "Delivery",
    "DurableEvent",
    "IdGenerator",
    "IdPrefix",
    "InputAdmitted",
    "InvalidInputError",
    "InvalidSessionInputError",
    "KittiwakeError",
    "Location",
    "ModelRef",
    "OperationUnavailableError",
    "Prompt",
    "PromptConflictError",
    "QuestionNotFoundError",
    "ResumeNotNeededError",
    "SessionInfo",
    "SessionMessage",
    "SessionNotFoundError",
    "StorageError",
    "SystemMessage",
    "UserMessage",
    "derived_id",
    "is_valid_id",
    "lazy_attribute",
    "open_runtime",
]


def __getattr__(name: str) -> Any:
    if name == "open_runtime":
        from actors import open_runtime

        return open_runtime
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
