"""``kittiwake serve --workers N``: one listening socket, N supervised worker processes."""

from gateway.cluster._workers import announce_ready as announce_ready
from gateway.cluster._workers import check_store_url as check_store_url
from gateway.cluster._workers import cluster_options as cluster_options
from gateway.cluster._workers import reach_store as reach_store
from gateway.cluster._workers import serve_with_workers as serve_with_workers
from gateway.cluster._workers import wait_for_stop as wait_for_stop
from gateway.cluster._workers import worker_telemetry_dir as worker_telemetry_dir

__all__ = [
    "announce_ready",
    "check_store_url",
    "cluster_options",
    "reach_store",
    "serve_with_workers",
    "wait_for_stop",
    "worker_telemetry_dir",
]
