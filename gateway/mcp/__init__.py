"""MCP's room on the HTTP core: OpenCode's ``/mcp`` routes (status, add, connect,
disconnect) and ``GET /experimental/resource``, over each Location's ``McpServers``."""

from gateway.mcp._routes import mcp_routes as mcp_routes

__all__ = ["mcp_routes"]
