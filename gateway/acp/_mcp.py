"""The editor's MCP servers (``mcpServers`` of ``session/new``, ``load``, ``resume`` and
``fork``): read into the runtime's server specs, and held as the session's own for as long
as this connection holds the session.

ACP describes three transports: stdio (``command``, ``args``, ``env``; every agent takes
it), ``http`` and ``sse`` (``url``, ``headers``). A stdio server runs in the session's
directory with the agent's environment plus ``env``; an ``http`` server is reached over
Streamable HTTP only, an ``sse`` one over SSE only; neither is signed in to (the editor's
headers are what it sends).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec
import trio

from gateway.acp._backend import Backend
from gateway.acp._rpc import Connection, RpcError
from gateway.acp._wire import INVALID_PARAMS
from runtime.mcp import McpServerSpec

__all__ = ["EditorServers", "editor_servers"]


class _Variable(msgspec.Struct, frozen=True):
    name: str
    value: str


class _Stdio(msgspec.Struct, frozen=True):
    name: str
    command: str
    args: list[str] | None = None
    env: list[_Variable] | None = None


class _Remote(msgspec.Struct, frozen=True):
    type: Literal["http", "sse"]
    name: str
    url: str
    headers: list[_Variable] | None = None


def editor_servers(servers: list[Any], directory: str) -> dict[str, McpServerSpec]:
    """The servers the editor passed, as the runtime's specs by name (a later one of the
    same name wins).

    Raises:
        RpcError: ``-32602`` for a server ACP does not describe (a missing field, an
            unknown ``type``), naming it.
    """
    specs: dict[str, McpServerSpec] = {}
    for index, given in enumerate(servers):
        kind = given.get("type") if isinstance(given, dict) else None
        try:
            if kind is None or kind == "stdio":
                stdio = msgspec.convert(given, _Stdio, strict=True)
                spec = McpServerSpec(
                    name=stdio.name, type="local", command=[stdio.command, *(stdio.args or [])],
                    environment={v.name: v.value for v in stdio.env or []}, cwd=directory,
                )  # fmt: skip
            else:
                remote = msgspec.convert(given, _Remote, strict=True)
                spec = McpServerSpec(
                    name=remote.name, type="remote", url=remote.url, oauth=False,
                    headers={v.name: v.value for v in remote.headers or []},
                    transport=remote.type,
                )  # fmt: skip
        except msgspec.ValidationError as exc:
            raise RpcError(INVALID_PARAMS, f"mcpServers[{index}]: {exc}") from None
        if spec.type == "remote" and not spec.url.startswith(("http://", "https://")):
            raise RpcError(INVALID_PARAMS, f"mcpServers[{index}]: url must be http(s)")
        specs[spec.name] = spec
    return specs


class EditorServers:
    """The editor's MCP servers of each session this connection holds: started when the
    session is set up with some, stopped when it is closed, set up again, or when the
    connection ends (its background tasks are cancelled)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._held: dict[str, trio.CancelScope] = {}

    async def hold(
        self, backend: Backend, session_id: str, specs: Mapping[str, McpServerSpec]
    ) -> None:
        """Stop the session's servers held so far, start *specs* (if any) as its own
        (attached: the server runs them), and wait until each connected or failed (bounded
        by the runtime's connect timeout). A server that fails is retried as any is; a server
        that refuses to run them is said in the log. Cancellation abandons the wait; the
        servers stay held."""
        self.release(session_id)
        if not specs:
            await trio.lowlevel.checkpoint()
            return
        scope = trio.CancelScope()
        self._held[session_id] = scope
        started: list[Any] = []
        ready = trio.Event()

        async def run() -> None:
            try:
                with scope:
                    async with backend.mcp_servers(session_id, specs) as servers:
                        started.append(servers)
                        ready.set()
                        await trio.sleep_forever()
            finally:
                ready.set()
                if self._held.get(session_id) is scope:
                    del self._held[session_id]

        self._conn.start_soon(run)
        await ready.wait()
        if started:
            await started[0].settled()

    def release(self, session_id: str) -> None:
        """Stop the session's servers (in the background, each bounded by the runtime's
        ``stop_grace``); a no-op when it has none."""
        scope = self._held.pop(session_id, None)
        if scope is not None:
            scope.cancel()
