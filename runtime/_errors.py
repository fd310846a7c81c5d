"""The runtime's error tree; the gateway maps each ``tag`` to an HTTP status.

KittiwakeError
├── InvalidInputError         bad input from a caller; nothing was written (400)
├── SessionNotFoundError      no session with that id (404)
├── PromptConflictError       a message id reused with different content (409)
├── OperationUnavailableError the operation does not exist yet (503)
└── StorageError              the store could not complete a write (500)
"""

from __future__ import annotations

__all__ = [
    "InvalidInputError",
    "KittiwakeError",
    "OperationUnavailableError",
    "PromptConflictError",
    "SessionNotFoundError",
    "StorageError",
]


class KittiwakeError(Exception):
    """Base of every error the runtime raises on purpose."""

    tag = "KittiwakeError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(KittiwakeError, ValueError):
    tag = "InvalidInputError"


class SessionNotFoundError(KittiwakeError, LookupError):
    tag = "SessionNotFoundError"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id}")
        self.session_id = session_id


class PromptConflictError(KittiwakeError):
    tag = "ConflictError"


class OperationUnavailableError(KittiwakeError):
    tag = "OperationUnavailableError"


class StorageError(KittiwakeError):
    tag = "StorageError"
