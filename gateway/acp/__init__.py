"""``kittiwake acp``: the Agent Client Protocol (version 1) on standard input and output, so
editors (Zed, JetBrains, Neovim clients) drive durable Kittiwake sessions.

A client of the runtime's public API, in a room of its own: ``EmbeddedBackend`` drives a
runtime in this process (``rt.sessions``, ``rt.tools``, the event hub), and routes a
session's tool I/O to the editor's files and terminals when the client offers them;
``AttachedBackend`` drives a running ``kittiwake serve`` over its HTTP API and websocket.
See ``docs/acp.md``.
"""

from gateway.acp._agent import AUTH_METHOD as AUTH_METHOD
from gateway.acp._agent import AcpAgent as AcpAgent
from gateway.acp._agent import AgentOptions as AgentOptions
from gateway.acp._attached import AttachedBackend as AttachedBackend
from gateway.acp._backend import Backend as Backend
from gateway.acp._backend import EmbeddedBackend as EmbeddedBackend
from gateway.acp._backend import ModelChoice as ModelChoice
from gateway.acp._backend import Offer as Offer
from gateway.acp._credentials import StoredCredentials as StoredCredentials
from gateway.acp._rpc import Connection as Connection
from gateway.acp._rpc import RpcError as RpcError
from gateway.acp._serve import protocol_streams as protocol_streams
from gateway.acp._serve import serve_acp as serve_acp
from gateway.acp._wire import PROTOCOL_VERSION as PROTOCOL_VERSION

__all__ = [
    "AUTH_METHOD",
    "AcpAgent",
    "AgentOptions",
    "AttachedBackend",
    "Backend",
    "Connection",
    "EmbeddedBackend",
    "ModelChoice",
    "Offer",
    "PROTOCOL_VERSION",
    "RpcError",
    "StoredCredentials",
    "protocol_streams",
    "serve_acp",
]
