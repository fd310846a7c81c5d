"""System Context: Context Sources, the System Context Registry, and built-in sources.

Loading is async; deciding what to admit at a Safe Provider-Turn Boundary is pure.
"""

from runtime.context._errors import DuplicateContextKeyError as DuplicateContextKeyError
from runtime.context._errors import EmptyBaselineError as EmptyBaselineError
from runtime.context._errors import EmptyRenderingError as EmptyRenderingError
from runtime.context._errors import InvalidContextKeyError as InvalidContextKeyError
from runtime.context._errors import SnapshotDecodeError as SnapshotDecodeError
from runtime.context._errors import SystemContextError as SystemContextError
from runtime.context._registry import ContributionHandle as ContributionHandle
from runtime.context._registry import Produced as Produced
from runtime.context._registry import Producer as Producer
from runtime.context._registry import RegistryStatistics as RegistryStatistics
from runtime.context._registry import SystemContextRegistry as SystemContextRegistry
from runtime.context._snapshot import EMPTY_SNAPSHOT as EMPTY_SNAPSHOT
from runtime.context._snapshot import Snapshot as Snapshot
from runtime.context._snapshot import SnapshotEntry as SnapshotEntry
from runtime.context._snapshot import decode_snapshot as decode_snapshot
from runtime.context._snapshot import encode_snapshot as encode_snapshot
from runtime.context._system import CONTEXT_KEY_PATTERN as CONTEXT_KEY_PATTERN
from runtime.context._system import UNAVAILABLE as UNAVAILABLE
from runtime.context._system import ContextSource as ContextSource
from runtime.context._system import InitializationBlocked as InitializationBlocked
from runtime.context._system import InitializationOutcome as InitializationOutcome
from runtime.context._system import Initialized as Initialized
from runtime.context._system import ObservedContext as ObservedContext
from runtime.context._system import ReconcileOutcome as ReconcileOutcome
from runtime.context._system import ReplacementBlocked as ReplacementBlocked
from runtime.context._system import ReplacementReady as ReplacementReady
from runtime.context._system import ReplaceOutcome as ReplaceOutcome
from runtime.context._system import SystemContext as SystemContext
from runtime.context._system import Unavailable as Unavailable
from runtime.context._system import Unchanged as Unchanged
from runtime.context._system import Updated as Updated
from runtime.context._system import validate_context_key as validate_context_key

__all__ = [
    "CONTEXT_KEY_PATTERN",
    "ContextSource",
    "ContributionHandle",
    "DuplicateContextKeyError",
    "EMPTY_SNAPSHOT",
    "EmptyBaselineError",
    "EmptyRenderingError",
    "InitializationBlocked",
    "InitializationOutcome",
    "Initialized",
    "InvalidContextKeyError",
    "ObservedContext",
    "Produced",
    "Producer",
    "ReconcileOutcome",
    "RegistryStatistics",
    "ReplaceOutcome",
    "ReplacementBlocked",
    "ReplacementReady",
    "Snapshot",
    "SnapshotDecodeError",
    "SnapshotEntry",
    "SystemContext",
    "SystemContextError",
    "SystemContextRegistry",
    "UNAVAILABLE",
    "Unavailable",
    "Unchanged",
    "Updated",
    "decode_snapshot",
    "encode_snapshot",
    "validate_context_key",
]
