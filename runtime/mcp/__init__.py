"""Kittiwake's MCP client: a Location's Model Context Protocol servers, as OpenCode's
``mcp`` configuration describes them.

Each Location's :class:`McpServers` runs its servers (local ones over stdio, each under a
guard process that takes its process group down with Kittiwake; remote ones over
Streamable HTTP, else SSE), contributes their tools to the Location's Tool Registry as
``<server>_<tool>`` (so every call passes its permission rules, bounding and telemetry),
offers their prompts as ``<server>:<prompt>`` commands and lists their resources. Their
requests of the client are answered: roots (the Location), elicitation (a durable question
of the calling session) and sampling (its model, under the ``mcp_sampling`` permission).
Past a threshold of tools, ``mcp_search`` stands in for their definitions (tool search). The
``mcp`` package is imported only when a server starts, in a worker thread.

:class:`McpOAuth` signs remote servers in (OAuth discovery, dynamic registration, PKCE,
the loopback callback, refresh; tokens in ``<data dir>/mcp-auth.json``).
"""

from runtime.mcp._convert import input_schema as input_schema
from runtime.mcp._convert import prompt_text as prompt_text
from runtime.mcp._convert import resource_json as resource_json
from runtime.mcp._convert import tool_output as tool_output
from runtime.mcp._debug import diagnose as diagnose
from runtime.mcp._discovery import McpOAuthLimits as McpOAuthLimits
from runtime.mcp._discovery import McpSignInError as McpSignInError
from runtime.mcp._host import McpCall as McpCall
from runtime.mcp._host import McpHost as McpHost
from runtime.mcp._names import MAX_TOOL_NAME as MAX_TOOL_NAME
from runtime.mcp._names import command_name as command_name
from runtime.mcp._names import sanitize as sanitize
from runtime.mcp._names import tool_ids as tool_ids
from runtime.mcp._oauth import CALLBACK_PATH as CALLBACK_PATH
from runtime.mcp._oauth import CALLBACK_PORT as CALLBACK_PORT
from runtime.mcp._oauth import McpOAuth as McpOAuth
from runtime.mcp._oauth import McpSignIn as McpSignIn
from runtime.mcp._oauth import TokenState as TokenState
from runtime.mcp._oauth import redirect_uri as redirect_uri
from runtime.mcp._oauth_store import McpAuthEntry as McpAuthEntry
from runtime.mcp._oauth_store import McpAuthStore as McpAuthStore
from runtime.mcp._oauth_store import McpClientInfo as McpClientInfo
from runtime.mcp._oauth_store import McpTokens as McpTokens
from runtime.mcp._search import SEARCH_TOOL as SEARCH_TOOL
from runtime.mcp._server import GUARD as GUARD
from runtime.mcp._server import McpAuth as McpAuth
from runtime.mcp._server import McpAuthRequired as McpAuthRequired
from runtime.mcp._server import McpServer as McpServer
from runtime.mcp._server import Status as Status
from runtime.mcp._servers import McpServerNotFound as McpServerNotFound
from runtime.mcp._servers import McpServers as McpServers
from runtime.mcp._servers import mcp_tool as mcp_tool
from runtime.mcp._spec import DEFAULT_CALL_TIMEOUT as DEFAULT_CALL_TIMEOUT
from runtime.mcp._spec import McpLimits as McpLimits
from runtime.mcp._spec import McpServerSpec as McpServerSpec
from runtime.mcp._spec import McpServerStatistics as McpServerStatistics
from runtime.mcp._spec import McpToolSearch as McpToolSearch
from runtime.mcp._spec import server_specs as server_specs
from runtime.mcp._spec import spec_of as spec_of
from runtime.mcp._spec import tool_search as tool_search

__all__ = [
    "CALLBACK_PATH",
    "CALLBACK_PORT",
    "DEFAULT_CALL_TIMEOUT",
    "GUARD",
    "MAX_TOOL_NAME",
    "McpAuth",
    "McpAuthEntry",
    "McpAuthRequired",
    "McpAuthStore",
    "McpCall",
    "McpClientInfo",
    "McpHost",
    "McpLimits",
    "McpOAuth",
    "McpOAuthLimits",
    "McpServer",
    "McpServerNotFound",
    "McpServerSpec",
    "McpServerStatistics",
    "McpServers",
    "McpSignIn",
    "McpSignInError",
    "McpTokens",
    "McpToolSearch",
    "SEARCH_TOOL",
    "Status",
    "TokenState",
    "command_name",
    "diagnose",
    "input_schema",
    "mcp_tool",
    "prompt_text",
    "redirect_uri",
    "resource_json",
    "sanitize",
    "server_specs",
    "spec_of",
    "tool_ids",
    "tool_output",
    "tool_search",
]
