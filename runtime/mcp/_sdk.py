"""The ``mcp`` package, imported at first need in a worker thread.

Importing it takes 0.5-0.9 s and about 23 MB (pydantic, starlette, its server side), so
a Location without MCP servers never imports it, and one with servers imports it off the
trio thread: sessions that use no MCP tool go on meanwhile.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import trio

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["IMPORT_LOCK", "Sdk", "load_sdk"]

IMPORT_LOCK: Final = threading.Lock()
"""Held by every worker thread importing parts of the ``mcp`` package: two threads
importing its modules from different entry points at once can deadlock on Python's
module locks (``_DeadlockError``)."""


@dataclass(frozen=True, slots=True)
class Sdk:
    """The parts of the ``mcp`` package the client uses (all public names)."""

    types: ModuleType
    ClientSession: Any
    McpError: type[Exception]
    StdioServerParameters: Any
    stdio_client: Any
    streamable_http_client: Any
    sse_client: Any
    anyio: ModuleType


_loaded: Sdk | None = None


def _import() -> Sdk:
    with IMPORT_LOCK:
        return _imported()


def _imported() -> Sdk:
    import anyio
    import mcp
    import mcp.types
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    return Sdk(
        types=mcp.types, ClientSession=mcp.ClientSession, McpError=mcp.McpError,
        StdioServerParameters=mcp.StdioServerParameters, stdio_client=mcp.stdio_client,
        streamable_http_client=streamable_http_client, sse_client=sse_client, anyio=anyio,
    )  # fmt: skip


async def load_sdk() -> Sdk:
    """The SDK, imported in a worker thread the first time (later calls only checkpoint).
    Cancellation abandons the wait, not the import."""
    global _loaded
    if _loaded is None:
        sdk = await trio.to_thread.run_sync(_import, abandon_on_cancel=True)
        _loaded = _loaded or sdk
    else:
        await trio.lowlevel.checkpoint()
    return _loaded
