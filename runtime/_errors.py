"""The runtime's error tree; the gateway maps each ``tag`` to an HTTP status.

KittiwakeError
├── InvalidInputError         bad input from a caller; nothing was written (400)
│   └── InvalidSessionInputError  a Location, agent or model a session cannot run with
├── SessionNotFoundError      no session with that id (404)
├── PromptConflictError       a message id reused with different content (409)
├── ResumeNotNeededError      a resume asked of a session that does not need one (409)
├── OperationUnavailableError the operation does not exist yet (503)
└── StorageError              the store could not complete a write (500)
"""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = [
    "InvalidInputError",
    "InvalidSessionInputError",
    "KittiwakeError",
    "OperationUnavailableError",
    "PromptConflictError",
    "QuestionNotFoundError",
    "ResumeNotNeededError",
    "SessionNotFoundError",
    "StorageError",
]

SessionField: TypeAlias = Literal["location", "agent", "model"]


class KittiwakeError(Exception):
    """Base of every error the runtime raises on purpose."""

    tag = "KittiwakeError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(KittiwakeError, ValueError):
    tag = "InvalidInputError"


class InvalidSessionInputError(InvalidInputError):
    """A session's Location, agent or model that it could not run with; nothing was written.

    ``field`` names which of the three was refused.
    """

    def __init__(self, field: SessionField, message: str) -> None:
        super().__init__(message)
        self.field: SessionField = field


class SessionNotFoundError(KittiwakeError, LookupError):
    tag = "SessionNotFoundError"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id}")
        self.session_id = session_id


class PromptConflictError(KittiwakeError):
    tag = "ConflictError"


class ResumeNotNeededError(KittiwakeError):
    tag = "ResumeNotNeededError"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id} does not need a resume")
        self.session_id = session_id


class OperationUnavailableError(KittiwakeError):
    tag = "OperationUnavailableError"


class QuestionNotFoundError(KittiwakeError, LookupError):
    """No pending question with this id (in this session)."""

    tag = "QuestionNotFoundError"

    def __init__(self, request_id: str) -> None:
        super().__init__(f"No pending question {request_id}")
        self.request_id = request_id


class StorageError(KittiwakeError):
    tag = "StorageError"
