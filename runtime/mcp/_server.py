"""One configured MCP server: its connection, supervised, and the calls made through it.

:meth:`McpServer.supervise` connects (a local server over stdio under the guard of
``_guard.py``; a remote one over its spec's ``transport``), lists its tools, prompts and
resources, re-lists them when it says they changed, and reconnects after a crash with a
doubling backoff, until :meth:`McpServer.stop`.

A connection runs inside a shielded scope that only :meth:`stop` ends: a stop closes it in
order (a local server's stdin closed, then SIGTERM and SIGKILL to its process group, by
the SDK; a remote session's DELETE) within ``stop_grace``, instead of a cancellation
killing the guard halfway.

Between the SDK's session and its transport two relay tasks pass the messages on: the
reading one notices the end of the connection (a crashed server's stdout closing), the
writing one notes the request id of each ``tools/call`` (by a ``_meta`` mark), so that a
call cut short sends ``notifications/cancelled`` for it.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import IO, TYPE_CHECKING, Any, Final, Literal

import trio

from runtime.mcp._convert import encoded, leaves, plain
from runtime.mcp._host import McpCall, McpHost
from runtime.mcp._requests import ServerRequests
from runtime.mcp._sdk import Sdk, load_sdk
from runtime.mcp._spec import McpLimits, McpServerSpec, McpServerStatistics
from runtime.mcp._stderr import log_tail as _tail
from runtime.mcp._stderr import open_log as _open_log
from runtime.tools import ToolError

if TYPE_CHECKING:
    import httpx

__all__ = ["GUARD", "McpAuth", "McpAuthRequired", "McpServer", "McpServerStatistics", "Status"]

_log = logging.getLogger("runtime.mcp")
GUARD: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_guard.py")
_MARK: Final = "kittiwake/call"
_CLIENT: Final = {"name": "kittiwake", "version": "0.1.0"}
Status = Literal[
    "connecting", "connected", "disabled", "failed", "needs_auth", "needs_client_registration"
]
_Outcome = Literal["closed", "failed", "stopped", "final"]


class McpAuthRequired(Exception):
    """The server wants its user to sign in (``needs_auth``), or its OAuth client to be
    registered first (``needs_client_registration``). Raised by an :data:`McpAuth`, and
    read from a 401 of a server whose ``oauth`` is not ``false``."""

    def __init__(self, message: str, *, registration: bool = False) -> None:
        super().__init__(message)
        self.registration = registration


McpAuth = Callable[[McpServerSpec], "httpx.Auth | None"]
"""The seam for signing in to remote servers: the ``httpx.Auth`` a remote server's
requests go through (the SDK's ``OAuthClientProvider`` is one), ``None`` for none; may
raise :class:`McpAuthRequired`."""


class McpServer:
    """One server of a Location (see the module docstring).

    Args:
        spec: what the configuration says.
        directory: the Location (the server's root; a local server's default ``cwd``).
        log_path: where a local server's standard error goes (truncated at each start).
        limits: timeouts and bounds.
        auth: signs remote requests in (``None``: no authentication but ``headers``).
        on_change: called after every change of status or listing.
        host: the runtime's side, which elicitation and sampling go to (or refused).
    """

    def __init__(
        self, spec: McpServerSpec, *, directory: str, log_path: str, limits: McpLimits,
        auth: McpAuth | None = None, on_change: Callable[[], None] = lambda: None,
        host: Callable[[], McpHost | None] = lambda: None,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.name = spec.name
        self.directory = directory
        self.log_path = log_path
        self.limits = limits
        self._auth = auth
        self._on_change = on_change
        self.status: Status = "connecting"
        self.error: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.prompts: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        self.generation = 0
        """Bumped whenever a listing changes (the Location applies tools at its next turn)."""
        self.tools_changed = 0
        """Re-listings after ``notifications/tools/list_changed`` that changed the tools."""
        self.starts = 0
        self.changed = trio.Event()
        """Set (and replaced) at every change."""
        self._sdk: Sdk | None = None
        self._session: Any = None
        self._stopping = False
        self._stop_scope = trio.CancelScope()
        self._body = trio.CancelScope()
        self._shield = trio.CancelScope(shield=True)
        self._retry = trio.Event()
        self._poke = trio.Event()
        self._dirty: set[str] = set()
        self._calls: set[trio.CancelScope] = set()
        self._request_ids: dict[str, Any] = {}
        self._marks = itertools.count()
        self._capabilities: Any = None
        self._counts = {"calls": 0, "progress": 0, "cancelled": 0}
        self._failure: BaseException | None = None
        self.requests = ServerRequests(  # roots, elicitation and sampling
            server=spec.name, directory=directory, timeout=spec.timeout, host=host,
            sdk=lambda: self._sdk,
        )  # fmt: skip

    # -- state ------------------------------------------------------------------------

    def _changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()
        self._on_change()

    def _set(self, status: Status, error: str | None = None) -> None:
        self.status, self.error = status, error
        self._changed()

    def describe(self) -> dict[str, Any]:
        """OpenCode's ``MCPStatus`` (a server still connecting is ``failed`` with that)."""
        if self.status in ("connected", "disabled", "needs_auth"):
            return {"status": self.status}
        if self.status == "connecting":
            return {"status": "failed", "error": "still connecting"}
        return {"status": self.status, "error": self.error or "unknown error"}

    def statistics(self) -> McpServerStatistics:
        """The server's counters (for the inspector and tests)."""
        return McpServerStatistics(
            status=self.status, starts=self.starts, in_flight=len(self._calls),
            tools=len(self.tools), prompts=len(self.prompts), resources=len(self.resources),
            **self._counts,
        )  # fmt: skip

    def stop(self) -> None:
        """End the connection in order, within ``stop_grace``; ``supervise`` returns after
        it (the status is then ``disabled``). Never blocks; idempotent."""
        self._stopping = True
        self._stop_scope.cancel()
        self._body.cancel()
        self._shield.deadline = min(
            self._shield.deadline, trio.current_time() + self.limits.stop_grace
        )
        self._cut_calls()

    def retry(self) -> None:
        """Reconnect now instead of at the end of the backoff."""
        self._retry.set()

    def _cut_calls(self) -> None:
        for scope in self._calls:
            scope.cancel()

    # -- supervision ------------------------------------------------------------------

    async def supervise(self) -> None:
        """Connect, and reconnect after each crash (doubling backoff from
        ``restart_backoff``, at most ``max_restarts`` failures in a row) until stopped.
        A server that needs sign-in, whose command does not exist or whose entry is
        wrong stays as it is. Never raises but ``Cancelled`` (the connection is then
        closed in order first, within ``stop_grace``)."""
        if self.spec.error is not None:
            return self._set("failed", self.spec.error)
        if not self.spec.enabled:
            return self._set("disabled")
        failures = 0
        with self._stop_scope:
            while not self._stopping:
                started = trio.current_time()
                try:
                    outcome = await self._connect_once()
                except Exception as exc:  # a bug or a broken SDK install: never the runtime's
                    _log.exception("MCP server supervision failed", extra={"server": self.name})
                    self._set("failed", f"internal error: {exc!r}")
                    outcome = "failed"
                if self._stopping or outcome == "final":
                    break
                if trio.current_time() - started >= self.limits.stable_after:
                    failures = 0
                failures += 1
                if failures > self.limits.max_restarts:
                    return self._set("failed", f"{self.error} (gave up after {failures} tries)")
                delay = min(
                    self.limits.restart_backoff * 2 ** (failures - 1), self.limits.max_backoff
                )
                self._set("failed", f"{self.error}; reconnecting in {delay:g} s")
                self._retry = trio.Event()
                with trio.move_on_after(delay):
                    await self._retry.wait()
        if self._stopping:
            self._set("disabled")

    async def _connect_once(self) -> _Outcome:
        self._set("connecting")
        self._sdk = sdk = await load_sdk()
        if self.spec.type == "local":
            missing = await trio.to_thread.run_sync(self._missing_command)
            if missing is not None:
                self._set("failed", missing)
                return "final"
            return await self._attempt(sdk, self._stdio)
        try:
            auth = self._auth(self.spec) if self._auth is not None else None
        except McpAuthRequired as exc:
            self._auth_needed(exc)
            return "final"
        if self.spec.transport == "sse":
            return await self._attempt(sdk, lambda s: self._sse(s, auth))
        outcome = await self._attempt(sdk, lambda s: self._streamable(s, auth))
        fallback = self.spec.transport == "auto" and self._http_status() not in (None, 401, 403)
        if outcome == "failed" and fallback:
            first = self.error
            outcome = await self._attempt(sdk, lambda s: self._sse(s, auth))
            if outcome == "failed":
                self._set("failed", f"Streamable HTTP: {first}; SSE: {self.error}")
        return outcome

    async def _attempt(
        self, sdk: Sdk, transport: Callable[[Sdk], AbstractAsyncContextManager[tuple[Any, Any]]]
    ) -> _Outcome:
        """One connection: open, initialize, list, serve until it closes or is stopped."""
        self._body = body = trio.CancelScope()
        self._shield = shield = trio.CancelScope(shield=True)
        self._failure = None
        self.starts += 1
        try:
            with shield:
                if self._stopping:
                    return "stopped"
                async with transport(sdk) as (read, write), trio.open_nursery() as relays:
                    closed = trio.Event()
                    ours = self._relays(sdk, relays, read, write, closed)
                    asks = self.requests
                    async with sdk.ClientSession(
                        ours[0], ours[1], message_handler=self._on_message,
                        list_roots_callback=asks.roots, elicitation_callback=asks.elicit,
                        sampling_callback=asks.sample, logging_callback=self._on_log,
                        client_info=sdk.types.Implementation(**_CLIENT),
                    ) as session:  # fmt: skip
                        with body:
                            await self._serve(session, closed)
                    relays.cancel_scope.cancel()
        except Exception as exc:  # the transport's, the handshake's, a listing's failure
            self._failure = exc
            return await self._failed(exc)
        finally:
            self._session = None
            self._cut_calls()
        if self._stopping:
            return "stopped"
        self._set("failed", await self._closed_message())
        return "closed"

    async def _serve(self, session: Any, closed: trio.Event) -> None:
        with trio.fail_after(self.limits.connect_timeout):
            init = await session.initialize()
            self._capabilities = init.capabilities
            await self._list(session, {"tools", "prompts", "resources"})
        self._session = session
        self._set("connected")
        while not closed.is_set():
            await self._poke.wait()
            self._poke = trio.Event()
            kinds, self._dirty = self._dirty, set()
            if kinds and not closed.is_set():
                with trio.fail_after(self.limits.connect_timeout):
                    changed = await self._list(session, kinds)
                if "tools" in kinds and changed:
                    self.tools_changed += 1
                    self._changed()

    async def _list(self, session: Any, kinds: set[str]) -> bool:
        """List what the server offers of *kinds* (each only if it declares it); True
        when the tools changed."""
        sdk, caps = self._sdk, self._capabilities
        assert sdk is not None
        before = encoded(self.tools)
        if "tools" in kinds and caps.tools is not None:
            self.tools = await self._paged(session.list_tools, "tools")
        if "prompts" in kinds and caps.prompts is not None:
            self.prompts = await self._paged(session.list_prompts, "prompts")
        if "resources" in kinds and caps.resources is not None:
            self.resources = await self._paged(session.list_resources, "resources")
        self.generation += 1
        return encoded(self.tools) != before

    async def _paged(self, fetch: Any, field: str) -> list[dict[str, Any]]:
        assert self._sdk is not None
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = (
                None if cursor is None else self._sdk.types.PaginatedRequestParams(cursor=cursor)
            )
            page = await (fetch() if params is None else fetch(params=params))
            items.extend(plain(x) for x in getattr(page, field))
            cursor = page.nextCursor
            if not cursor or len(items) >= self.limits.max_items:
                return items[: self.limits.max_items]

    # -- relays and callbacks -------------------------------------------------------------

    def _relays(
        self, sdk: Sdk, nursery: trio.Nursery, read: Any, write: Any, closed: trio.Event
    ) -> tuple[Any, Any]:
        """The streams the session uses, relayed to and from the transport's."""
        to_session, session_read = sdk.anyio.create_memory_object_stream(0)
        session_write, from_session = sdk.anyio.create_memory_object_stream(0)
        nursery.start_soon(self._relay_in, sdk, read, to_session, closed)
        nursery.start_soon(self._relay_out, sdk, from_session, write)
        return session_read, session_write

    async def _relay_in(self, sdk: Sdk, source: Any, sink: Any, closed: trio.Event) -> None:
        try:
            with source, sink:
                async for item in source:
                    await sink.send(item)
        except (sdk.anyio.ClosedResourceError, sdk.anyio.BrokenResourceError):
            pass
        finally:
            closed.set()
            self._poke.set()

    async def _relay_out(self, sdk: Sdk, source: Any, sink: Any) -> None:
        try:
            with source, sink:
                async for message in source:
                    self._note_request(message)
                    await sink.send(message)
        except (sdk.anyio.ClosedResourceError, sdk.anyio.BrokenResourceError):
            pass

    def _note_request(self, message: Any) -> None:
        root = message.message.root
        if getattr(root, "method", None) == "tools/call":
            meta = (root.params or {}).get("_meta") or {}
            mark = meta.get(_MARK)
            if isinstance(mark, str):
                self._request_ids[mark] = root.id

    async def _on_message(self, message: Any) -> None:
        sdk = self._sdk
        assert sdk is not None
        if isinstance(message, Exception):
            _log.info("MCP transport error", extra={"server": self.name, "error": repr(message)})
            return
        root = getattr(message, "root", None)
        kinds = {
            sdk.types.ToolListChangedNotification: "tools",
            sdk.types.PromptListChangedNotification: "prompts",
            sdk.types.ResourceListChangedNotification: "resources",
        }  # fmt: skip
        kind = kinds.get(type(root))
        if kind is not None:
            self._dirty.add(kind)
            self._poke.set()
        await trio.lowlevel.checkpoint()

    async def _on_log(self, params: Any) -> None:
        _log.debug("MCP server log", extra={"server": self.name, "data": repr(params.data)})
        await trio.lowlevel.checkpoint()

    # -- transports -------------------------------------------------------------------------

    def _missing_command(self) -> str | None:
        """Why the local command cannot run, or None (blocking: it looks on PATH)."""
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        program = self.spec.command[0]
        path = {**os.environ, **self.spec.environment}.get("PATH", os.defpath)
        if os.sep in program:
            found = os.path.join(self.spec.cwd, program)
            ok = os.path.isfile(found) and os.access(found, os.X_OK)
        else:
            ok = shutil.which(program, path=path) is not None
        if not os.path.isdir(self.spec.cwd):
            return f"cwd is not a directory: {self.spec.cwd}"
        return None if ok else f"command not found: {program}"

    @asynccontextmanager
    async def _stdio(self, sdk: Sdk) -> AsyncIterator[tuple[Any, Any]]:
        log: IO[str] = await trio.to_thread.run_sync(_open_log, self.log_path)
        try:
            params = sdk.StdioServerParameters(
                command=sys.executable,
                args=["-I", "-S", GUARD, str(os.getpid()), *self.spec.command],
                env={**os.environ, **self.spec.environment}, cwd=self.spec.cwd,
            )  # fmt: skip
            async with sdk.stdio_client(params, errlog=log) as (read, write):
                yield read, write
        finally:
            log.close()

    def _http_client(self, auth: httpx.Auth | None) -> httpx.AsyncClient:
        import httpx

        timeout = httpx.Timeout(self.limits.connect_timeout, read=300.0)
        return httpx.AsyncClient(headers=self.spec.headers, timeout=timeout, auth=auth)

    @asynccontextmanager
    async def _streamable(
        self, sdk: Sdk, auth: httpx.Auth | None
    ) -> AsyncIterator[tuple[Any, Any]]:
        async with self._http_client(auth) as client:
            async with sdk.streamable_http_client(self.spec.url, http_client=client) as streams:
                yield streams[0], streams[1]

    @asynccontextmanager
    async def _sse(self, sdk: Sdk, auth: httpx.Auth | None) -> AsyncIterator[tuple[Any, Any]]:
        async with sdk.sse_client(
            self.spec.url, headers=self.spec.headers, timeout=self.limits.connect_timeout, auth=auth
        ) as (read, write):
            yield read, write

    # -- failures ---------------------------------------------------------------------------

    def _http_status(self) -> int | None:
        import httpx

        for leaf in leaves(self._failure):
            if isinstance(leaf, httpx.HTTPStatusError):
                return leaf.response.status_code
        return None

    def _auth_needed(self, exc: McpAuthRequired) -> None:
        if exc.registration:
            self._set("needs_client_registration", str(exc))
        else:
            self._set("needs_auth", str(exc))

    async def _failed(self, exc: BaseException) -> _Outcome:
        found = list(leaves(exc))
        for leaf in found:
            if isinstance(leaf, McpAuthRequired):
                self._auth_needed(leaf)
                return "final"
        if self._http_status() == 401:
            if self.spec.oauth:
                self._set("needs_auth", "the server answered 401 Unauthorized")
                return "final"
            self._set("failed", f"{self.spec.url} answered 401 Unauthorized (oauth is off)")
            return "final"
        message = self._describe(found[0] if found else exc)
        if self.spec.type == "local":
            message = await self._with_stderr(message)
        self._set("failed", message)
        return "failed"

    def _describe(self, exc: BaseException) -> str:
        import httpx

        if isinstance(exc, trio.TooSlowError):
            return f"no answer within {self.limits.connect_timeout:g} s while connecting"
        if isinstance(exc, httpx.HTTPStatusError):
            return f"{self.spec.url} answered {exc.response.status_code}"
        if isinstance(exc, httpx.TransportError):
            return f"cannot reach {self.spec.url}: {exc or type(exc).__name__}"
        if self._sdk is not None and isinstance(exc, self._sdk.McpError):
            return f"MCP error {exc.error.code}: {exc.error.message}"  # type: ignore[attr-defined]
        return str(exc) or type(exc).__name__

    async def _closed_message(self) -> str:
        message = "the server closed the connection"
        return await self._with_stderr(message) if self.spec.type == "local" else message

    async def _with_stderr(self, message: str) -> str:
        tail = await trio.to_thread.run_sync(_tail, self.log_path, self.limits.stderr_tail)
        return f"{message}; its stderr ends: {tail}" if tail else message

    # -- calls ------------------------------------------------------------------------------

    def _unavailable(self) -> ToolError:
        state = self.status if self.error is None else f"{self.status}: {self.error}"
        return ToolError(f"MCP server {self.name} is not connected ({state})")

    async def call(
        self, tool: str, arguments: dict[str, Any], call: McpCall | None = None
    ) -> dict[str, Any]:
        """Call *tool* (for *call*: the server's requests meanwhile are its session's);
        its ``CallToolResult`` as JSON. The server's ``timeout`` bounds the wait, each
        progress notification starts it again and it stands still while the user or the
        model answers the server; past it, or on cancellation, the server is sent
        ``notifications/cancelled`` for the request.

        Raises:
            ToolError: not connected, timed out, the connection ended, or the server
                answered an error.
        """
        session, sdk = self._session, self._sdk
        if session is None or sdk is None:
            await trio.lowlevel.checkpoint()
            raise self._unavailable()
        timeout = self.spec.timeout
        mark = f"{next(self._marks)}"
        self._counts["calls"] += 1
        with trio.CancelScope(deadline=trio.current_time() + timeout) as scope:
            self._calls.add(scope)

            async def progress(value: float, total: float | None, message: str | None) -> None:
                self._counts["progress"] += 1
                scope.deadline = trio.current_time() + timeout
                await trio.lowlevel.checkpoint()

            try:
                with self.requests.calling(call, scope):
                    result = await self._awaited(
                        session, sdk, mark,
                        session.call_tool(tool, arguments, progress_callback=progress,
                                          meta={_MARK: mark}),
                    )  # fmt: skip
            finally:
                self._calls.discard(scope)
        if scope.cancelled_caught:
            if self._session is not session:
                raise ToolError(f"MCP server {self.name} closed the connection during the call")
            raise ToolError(
                f"MCP error -32001: Request timed out: {self.name} did not answer {tool} "
                f"within {timeout:g} s (the server's timeout; a progress notification "
                f"starts it again)"
            )  # fmt: skip
        return plain(result)

    async def _awaited(self, session: Any, sdk: Sdk, mark: str, request: Any) -> Any:
        """Await *request*; when it does not finish (a timeout, a cancellation), send
        ``notifications/cancelled`` for it under a shield bounded by ``cancel_grace``."""
        finished = False
        try:
            result = await request
            finished = True
            return result
        except sdk.McpError as exc:
            finished = True
            error = exc.error  # type: ignore[attr-defined]
            raise ToolError(f"MCP error {error.code}: {error.message}") from None
        except Exception:
            finished = True
            raise
        finally:
            request_id = self._request_ids.pop(mark, None)
            if not finished and request_id is not None and self._session is session:
                with trio.move_on_after(self.limits.cancel_grace, shield=True):
                    await self._send_cancelled(session, sdk, request_id)

    async def _send_cancelled(self, session: Any, sdk: Sdk, request_id: Any) -> None:
        types = sdk.types
        params = types.CancelledNotificationParams(requestId=request_id, reason="cancelled")
        notification = types.ClientNotification(types.CancelledNotification(params=params))
        self._counts["cancelled"] += 1
        try:
            await session.send_notification(notification)
        except (sdk.anyio.ClosedResourceError, sdk.anyio.BrokenResourceError):
            pass

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        """The prompt *name* with *arguments*, as JSON (``GetPromptResult``).

        Raises:
            ToolError: not connected, no answer within the server's timeout, or an error.
        """
        return await self._request(lambda s: s.get_prompt(name, arguments), f"prompt {name}")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """The resource at *uri*, as JSON (``ReadResourceResult``); raises as
        :meth:`get_prompt`."""
        return await self._request(lambda s: s.read_resource(uri), f"resource {uri}")

    async def _request(self, make: Callable[[Any], Any], what: str) -> dict[str, Any]:
        session, sdk = self._session, self._sdk
        if session is None or sdk is None:
            await trio.lowlevel.checkpoint()
            raise self._unavailable()
        with trio.move_on_after(self.spec.timeout) as scope:
            try:
                return plain(await make(session))
            except sdk.McpError as exc:
                error = exc.error  # type: ignore[attr-defined]
                raise ToolError(f"MCP error {error.code}: {error.message}") from None
        assert scope.cancelled_caught
        raise ToolError(f"{self.name} did not answer for {what} within {self.spec.timeout:g} s")
