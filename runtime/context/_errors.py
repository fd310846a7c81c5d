"""Errors raised while composing or rendering System Context.

Hierarchy::

    SystemContextError
    ├── InvalidContextKeyError (also ValueError)
    ├── DuplicateContextKeyError (also ValueError)
    ├── EmptyRenderingError (also ValueError)
    ├── EmptyBaselineError (also ValueError)
    └── SnapshotDecodeError (also ValueError)
"""

from __future__ import annotations

__all__ = [
    "DuplicateContextKeyError",
    "EmptyBaselineError",
    "EmptyRenderingError",
    "InvalidContextKeyError",
    "SnapshotDecodeError",
    "SystemContextError",
]


class SystemContextError(Exception):
    """Base class for System Context errors."""


class InvalidContextKeyError(SystemContextError, ValueError):
    """A Context Source or contribution key is not a stable namespaced key."""


class DuplicateContextKeyError(SystemContextError, ValueError):
    """Two Context Sources (or two live contributions) share one key."""


class EmptyRenderingError(SystemContextError, ValueError):
    """A Context Source renderer returned empty text."""


class EmptyBaselineError(SystemContextError, ValueError):
    """A Baseline System Context would have been empty."""


class SnapshotDecodeError(SystemContextError, ValueError):
    """Stored Context Snapshot bytes are not a snapshot document."""
