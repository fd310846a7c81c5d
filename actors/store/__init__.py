"""Storage's actor: trio's side of the store (group commit, a bounded queue its thread drains)
and the runtime's telemetry tables beside it.
"""

from actors.store._storage import DEFAULT_MAX_BATCH as DEFAULT_MAX_BATCH
from actors.store._storage import DRAIN_FENCE as DRAIN_FENCE
from actors.store._storage import StorageActor as StorageActor
from actors.store._storage import StorageMode as StorageMode
from actors.store._telemetry import open_telemetry as open_telemetry

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DRAIN_FENCE",
    "StorageActor",
    "StorageMode",
    "open_telemetry",
]
