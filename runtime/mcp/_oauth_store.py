"""Where remote MCP servers' sign-ins are kept: ``<data dir>/mcp-auth.json`` (mode 0600).

One entry per server name, in OpenCode's shape (``tokens``, ``clientInfo``, ``serverUrl``)
plus what a refresh needs later (``tokenEndpoint``, ``resource``). An entry is used only
for the URL it was made for: a server whose ``url`` changed signs in again.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgspec

__all__ = ["McpAuthEntry", "McpAuthStore", "McpClientInfo", "McpTokens"]


class McpTokens(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """The tokens of a sign-in; ``expires_at`` in epoch seconds (None: never said)."""

    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None


class McpClientInfo(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """The OAuth client Kittiwake is at the server's authorization server (registered
    dynamically, RFC 7591); times in epoch seconds."""

    client_id: str
    client_secret: str | None = None
    client_id_issued_at: float | None = None
    client_secret_expires_at: float | None = None
    token_endpoint_auth_method: str | None = None


class McpAuthEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One server's sign-in: valid only for ``server_url``."""

    server_url: str | None = None
    tokens: McpTokens | None = None
    client_info: McpClientInfo | None = None
    token_endpoint: str | None = None
    """Where refreshes go (the authorization server's ``token_endpoint``)."""
    resource: str | None = None
    """The RFC 8707 resource the tokens were asked for."""


_decode = msgspec.json.Decoder(dict[str, McpAuthEntry]).decode


class McpAuthStore:
    """Entries by server name in ``<data_dir>/mcp-auth.json``: mode 0600, each write a new
    file renamed over the old one. Small synchronous file operations (as
    ``runtime.llm.CredentialStore``); an unreadable or malformed file reads as empty (a
    warning is the caller's business: nothing is lost that signing in again cannot give)."""

    def __init__(self, data_dir: str | Path, *, filename: str = "mcp-auth.json") -> None:
        self.path = Path(data_dir) / filename

    def load(self) -> dict[str, McpAuthEntry]:
        """Every entry; an absent or malformed file is empty."""
        try:
            return _decode(self.path.read_bytes())
        except (OSError, msgspec.DecodeError):
            return {}

    def get(self, name: str, url: str | None = None) -> McpAuthEntry | None:
        """*name*'s entry; with *url*, only if it was made for that URL."""
        entry = self.load().get(name)
        if entry is None or (url is not None and entry.server_url != url):
            return None
        return entry

    def put(self, name: str, entry: McpAuthEntry) -> None:
        """Store *entry* as *name*'s, replacing the previous one."""
        data = self.load()
        data[name] = entry
        self._write(data)

    def remove(self, name: str) -> bool:
        """Forget *name*'s entry; whether there was one."""
        data = self.load()
        if data.pop(name, None) is None:
            return False
        self._write(data)
        return True

    def _write(self, data: dict[str, McpAuthEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".mcp-auth-", suffix=".tmp")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(msgspec.json.format(msgspec.json.encode(data), indent=2))
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
