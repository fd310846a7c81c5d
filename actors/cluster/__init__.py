"""Cluster routing: this runtime as one worker among others on one PostgreSQL database
(leases, the relay of other workers' events, the sweep of expired leases).
"""

from actors.cluster._cluster import ClusterOptions as ClusterOptions
from actors.cluster._cluster import Relay as Relay
from actors.cluster._cluster import SessionLease as SessionLease
from actors.cluster._cluster import sweep as sweep
from actors.cluster._cluster import wait_elsewhere as wait_elsewhere

__all__ = [
    "ClusterOptions",
    "Relay",
    "SessionLease",
    "sweep",
    "wait_elsewhere",
]
