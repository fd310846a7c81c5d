"""MCP's room on the HTTP core: OpenCode's ``/mcp`` routes (status, add, connect,
disconnect, sign-in) and ``GET /experimental/resource``, over each Location's
``McpServers`` and the runtime's ``McpOAuth``."""

from gateway.mcp._routes import mcp_routes as mcp_routes

__all__ = ["mcp_routes"]
