"""What a Location's ``mcp`` configuration asks for, as one frozen spec per server (pure)."""

from __future__ import annotations

import os
from typing import Any, Final, Literal

import msgspec

from runtime.config import Config, McpServerConfig

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "McpLimits",
    "McpServerSpec",
    "McpServerStatistics",
    "McpToolSearch",
    "server_specs",
    "spec_of",
    "tool_search",
]

DEFAULT_CALL_TIMEOUT: Final = 60.0
"""Seconds a tool call waits when neither the server nor ``experimental.mcp_timeout`` says."""


class McpLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of a Location's MCP servers (seconds unless said).

    Attributes:
        connect_timeout: the ``initialize`` handshake and each listing (OpenCode's 30 s).
        restart_backoff: the first delay before reconnecting a server that crashed or
            failed; doubled at each failure in a row, capped at ``max_backoff``.
        max_restarts: failures in a row after which a server stays ``failed`` (a
            connection that lived ``stable_after`` seconds resets the count).
        stop_grace: how long a stopping server's orderly close may take (stdin closed,
            then SIGTERM and SIGKILL for a local one; the session's DELETE for a remote
            one) before it is cut short.
        cancel_grace: how long sending ``notifications/cancelled`` may take.
        max_items: tools, prompts or resources listed per server at most (pages are
            followed until then).
        stderr_tail: bytes of a local server's standard error quoted in its error.
        max_resource_chars: characters of a resource's text a prompt it is attached to
            carries (the rest is cut with a note).
    """

    connect_timeout: float = 30.0
    restart_backoff: float = 0.5
    max_backoff: float = 30.0
    max_restarts: int = 5
    stable_after: float = 30.0
    stop_grace: float = 5.0
    cancel_grace: float = 2.0
    max_items: int = 1000
    stderr_tail: int = 2000
    max_resource_chars: int = 256 * 1024


class McpServerStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one server: connections started, calls made and in flight, progress
    notifications received, ``notifications/cancelled`` sent, what it lists."""

    status: str
    starts: int
    calls: int
    in_flight: int
    progress: int
    cancelled: int
    tools: int
    prompts: int
    resources: int


class McpServerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One configured server.

    ``type`` is ``None`` for an entry that is only ``{"enabled": false}``; ``error`` says
    why an entry cannot be used (then its status is ``failed``). ``cwd`` is absolute;
    ``timeout`` is a call's, in seconds. ``oauth`` is False when the configuration says
    ``"oauth": false`` (a 401 then fails instead of asking for sign-in); ``oauth_options``
    holds the ``oauth`` object's keys for whoever signs in. ``transport`` is a remote
    server's: ``auto`` tries Streamable HTTP, then SSE; ``http`` and ``sse`` only that one
    (an editor's server says which).
    """

    name: str
    type: Literal["local", "remote"] | None = None
    enabled: bool = True
    command: list[str] = []
    environment: dict[str, str] = {}
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = {}
    oauth: bool = True
    oauth_options: dict[str, Any] = {}
    timeout: float = DEFAULT_CALL_TIMEOUT
    transport: Literal["auto", "http", "sse"] = "auto"
    error: str | None = None


class McpToolSearch(msgspec.Struct, frozen=True, kw_only=True):
    """Tool search (``experimental.mcp_tool_search``): when a Location's MCP tools number
    more than ``threshold``, the model is offered ``mcp_search`` instead of them, which
    answers at most ``max_results`` tools a query matches."""

    threshold: int = 40
    max_results: int = 10


def tool_search(config: Config) -> McpToolSearch | None:
    """The tool search settings of *config* (None: switched off, ``false``)."""
    configured = config.experimental.mcp_tool_search if config.experimental else None
    if configured is False:
        return None
    if configured is None or configured is True:
        return McpToolSearch()
    fields = {"threshold": configured.threshold, "max_results": configured.max_results}
    return McpToolSearch(**{k: v for k, v in fields.items() if v is not None})


def server_specs(config: Config, directory: str) -> dict[str, McpServerSpec]:
    """The servers of *config*'s ``mcp`` key, by name, for the Location *directory*:
    a call's timeout is the server's ``timeout``, else ``experimental.mcp_timeout``, else
    60 s; a local server's ``cwd`` is relative to *directory* (and defaults to it)."""
    default = DEFAULT_CALL_TIMEOUT
    if config.experimental is not None and config.experimental.mcp_timeout is not None:
        default = config.experimental.mcp_timeout / 1000
    return {
        name: spec_of(name, entry, directory, default) for name, entry in (config.mcp or {}).items()
    }


def spec_of(
    name: str, entry: McpServerConfig, directory: str, default_timeout: float = DEFAULT_CALL_TIMEOUT
) -> McpServerSpec:
    """One server's spec; an entry missing what its type needs gets an ``error``."""
    timeout = entry.timeout / 1000 if entry.timeout is not None else default_timeout
    enabled = entry.enabled is not False
    kind = entry.type
    if kind is None and (entry.command or entry.url):
        kind = "local" if entry.command else "remote"
    error = _problem(name, entry, kind)
    oauth = entry.oauth
    return McpServerSpec(
        name=name, type=kind, enabled=enabled, command=list(entry.command or []),
        environment=dict(entry.environment or {}),
        cwd=os.path.normpath(os.path.join(directory, entry.cwd or "")),
        url=entry.url or "", headers=dict(entry.headers or {}), oauth=oauth is not False,
        oauth_options=msgspec.to_builtins(oauth) if not isinstance(oauth, bool | None) else {},
        timeout=timeout, error=error,
    )  # fmt: skip


def _problem(name: str, entry: McpServerConfig, kind: str | None) -> str | None:
    if kind is None:
        return None if entry.enabled is False else f"mcp.{name}: needs a type, local or remote"
    if kind == "local" and not entry.command:
        return f"mcp.{name}: a local server needs a command"
    if kind == "remote" and not entry.url:
        return f"mcp.{name}: a remote server needs a url"
    if kind == "remote" and not (entry.url or "").startswith(("http://", "https://")):
        return f"mcp.{name}: url must be http:// or https://, got {entry.url!r}"
    return None
