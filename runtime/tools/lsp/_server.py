"""One supervised language server process: JSON-RPC over its stdin/stdout with trio.

A :class:`LanguageServer` starts when first asked (``ensure``), answers requests, keeps
the diagnostics the server publishes, and is supervised by :meth:`supervise`: a process
that exits unasked (crash, ``kill -9``) is started again after a backoff (doubling,
capped), up to ``max_restarts`` failures in a row, after which its status is ``error``;
one left unused for ``idle_timeout`` seconds is shut down (``shutdown``, ``exit``, then
killed if it lingers) and starts again at the next use. Messages are typed with
``lsprotocol`` (params unstructured, results structured by its converter).
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import trio

from runtime.tools.lsp._rpc import FrameError, FrameReader, encode_frame

if TYPE_CHECKING:
    from cattrs import Converter
    from lsprotocol import types as lsp

__all__ = ["LanguageServer", "LspError", "LspLimits", "ServerSpec", "converter"]

_log = logging.getLogger("runtime.tools.lsp")
_STABLE_AFTER: Final = 30.0  # a server that ran this long resets the failure count
_MAX_FRAME: Final = 64 * 1024 * 1024
_CLOSE_GRACE: Final = 2.0
Status = Literal["stopped", "starting", "connected", "error"]


class ServerSpec(msgspec.Struct, frozen=True, kw_only=True):
    """How to run one language server, and for which file extensions (``.py``)."""

    name: str
    command: list[str]
    extensions: list[str]
    env: dict[str, str] = {}
    initialization: dict[str, Any] | None = None


class LspLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Timeouts of language servers, in seconds (config ``language_servers``).

    ``diagnostics_settle`` is how long to wait after a publication for a later one
    (servers publish per linter); ``restart_backoff`` the first delay before a restart.
    """

    idle_timeout: float = 300.0
    start_timeout: float = 20.0
    request_timeout: float = 10.0
    diagnostics_timeout: float = 5.0
    diagnostics_settle: float = 0.15
    restart_backoff: float = 0.5
    max_restarts: int = 5


class LspError(Exception):
    """A request failed: the server answered with an error, exited, or is not running."""


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: Any = None
        self.error: str | None = None


class LanguageServer:
    """One server for one Location root (see the module docstring).

    Args:
        spec: the command and its file extensions.
        root: the Location's directory (the workspace root).
        limits: read again at each start and each wait.
    """

    def __init__(self, spec: ServerSpec, root: str, limits: Callable[[], LspLimits]) -> None:
        self.spec = spec
        self.root = root
        self._limits = limits
        self.status: Status = "stopped"
        self.pid: int | None = None
        self.starts = 0
        self.restarts = 0
        self.error: str | None = None
        self.changed = trio.Event()
        """Set (and replaced) at every status change or publication."""
        self.last_used = trio.current_time()
        self._running = False
        self._busy = 0
        self._ready = trio.Event()
        self._send_lock = trio.Lock()
        self._stdin: trio.abc.SendStream | None = None
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self.versions: dict[str, int] = {}
        """Open documents by URI, with the version last sent."""
        self.diagnostics: dict[str, tuple[lsp.Diagnostic, ...]] = {}
        self.published: dict[str, int] = {}
        """How many publications arrived per URI since the process started."""

    @property
    def running(self) -> bool:
        return self._running

    def _notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def _set_status(self, status: Status) -> None:
        self.status = status
        self._notify()

    @contextmanager
    def using(self) -> Iterator[None]:
        """Mark the server in use for the block: it does not idle out meanwhile."""
        self._busy += 1
        self.last_used = trio.current_time()
        try:
            yield
        finally:
            self._busy -= 1
            self.last_used = trio.current_time()

    def ensure(self, nursery: trio.Nursery) -> None:
        """Start the supervising task in *nursery* unless it runs."""
        self.last_used = trio.current_time()
        if not self._running:
            self._running = True
            self.error = None
            nursery.start_soon(self.supervise)

    async def wait_ready(self) -> None:
        """Wait until the server is initialized. Raises ``LspError`` when it stopped or
        failed, or after ``start_timeout``."""
        with trio.move_on_after(self._limits().start_timeout):
            while not self._ready.is_set():
                if not self._running:
                    raise LspError(f"{self.spec.name}: {self.error or 'not running'}")
                await self.changed.wait()
            return
        raise LspError(f"{self.spec.name} did not start within the start timeout")

    async def supervise(self) -> None:
        """Run the server, restarting it after an unasked exit, until it idles out or
        fails ``max_restarts`` times in a row. Never raises but ``Cancelled`` (the
        process is killed then)."""
        failures = 0
        try:
            while True:
                started = trio.current_time()
                outcome = await self._run_once()
                if outcome == "idle":
                    self._set_status("stopped")
                    return
                if trio.current_time() - started >= _STABLE_AFTER:
                    failures = 0
                failures += 1
                limits = self._limits()
                if outcome == "missing" or failures > limits.max_restarts:
                    self._set_status("error")
                    return
                self.restarts += 1
                self._set_status("starting")
                await trio.sleep(min(limits.restart_backoff * 2 ** (failures - 1), 30.0))
        finally:
            self._running = False
            self._notify()

    async def _run_once(self) -> Literal["idle", "crashed", "missing"]:
        limits = self._limits()
        self._set_status("starting")
        try:
            process = await trio.lowlevel.open_process(
                self.spec.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, cwd=self.root, env={**os.environ, **self.spec.env},
            )  # fmt: skip
        except OSError as exc:
            self.error = f"cannot start {self.spec.command[0]}: {exc.strerror or exc}"
            return "missing"
        self.starts += 1
        self.pid = process.pid
        self._stdin = process.stdin
        self.versions.clear()
        self.diagnostics.clear()
        self.published.clear()
        idle = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_until_exit, process, nursery.cancel_scope)
                try:
                    with trio.fail_after(limits.start_timeout):
                        await self._initialize()
                except (trio.TooSlowError, LspError) as exc:
                    self.error = f"initialization failed: {exc or 'timed out'}"
                    nursery.cancel_scope.cancel()
                    return "crashed"
                self._ready.set()
                self._set_status("connected")
                await self._until_idle()
                idle = True
                await self._shut_down()
                nursery.cancel_scope.cancel()
        finally:
            self._ready = trio.Event()
            self._stdin = None
            self._fail_pending("the language server exited")
            await _reap(process, graceful=idle)
        if not idle:
            self.error = f"exited with status {process.returncode}"
            _log.warning(
                "language server exited", extra={"server": self.spec.name, "root": self.root,
                                                 "returncode": process.returncode},
            )  # fmt: skip
        return "idle" if idle else "crashed"

    async def _read_until_exit(self, process: trio.Process, scope: trio.CancelScope) -> None:
        reader = FrameReader(_MAX_FRAME)
        assert process.stdout is not None
        try:
            while data := await process.stdout.receive_some(65536):
                for message in reader.feed(data):
                    await self._dispatch(message)
        except (FrameError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.error = str(exc)
        scope.cancel()

    async def _dispatch(self, message: Any) -> None:
        from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method is None and "id" in message:
            pending = self._pending.pop(message["id"], None)
            if pending is not None:
                error = message.get("error")
                pending.error = None if error is None else str(error.get("message", error))
                pending.result = message.get("result")
                pending.done.set()
        elif method == lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            params = converter().structure(message.get("params"), lsp.PublishDiagnosticsParams)
            self.diagnostics[params.uri] = tuple(params.diagnostics)
            self.published[params.uri] = self.published.get(params.uri, 0) + 1
            self._notify()
        elif method is not None and "id" in message:  # a request to us: answer emptily
            result: Any = None
            if method == lsp.WORKSPACE_CONFIGURATION:
                items = (message.get("params") or {}).get("items") or []
                result = [None] * len(items)
            await self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def _send(self, message: dict[str, Any]) -> None:
        if self._stdin is None:
            raise LspError(f"{self.spec.name} is not running")
        try:
            async with self._send_lock:
                await self._stdin.send_all(encode_frame(message))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise LspError(f"{self.spec.name}: {exc}") from None

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification (*params* an lsprotocol value or plain data)."""
        await self._send({"jsonrpc": "2.0", "method": method, "params": _plain(params)})

    async def request(self, method: str, params: Any, wait: float | None = None) -> Any:
        """Send a request and return its raw result.

        Raises ``LspError`` for an error answer, an exit, or no answer within
        *wait* seconds (default ``request_timeout``). Cancellation abandons the answer.
        """
        self.last_used = trio.current_time()
        self._next_id += 1
        ident = self._next_id
        pending = self._pending[ident] = _Pending()
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": ident, "method": method, "params": _plain(params)}
            )
            with trio.move_on_after(wait or self._limits().request_timeout):
                await pending.done.wait()
        finally:
            self._pending.pop(ident, None)
        if not pending.done.is_set():
            raise LspError(f"{self.spec.name} did not answer {method} in time")
        if pending.error is not None:
            raise LspError(f"{self.spec.name}: {method}: {pending.error}")
        return pending.result

    def _fail_pending(self, reason: str) -> None:
        for pending in self._pending.values():
            pending.error = reason
            pending.done.set()
        self._pending.clear()

    async def _initialize(self) -> None:
        from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

        uri = _uri(self.root)
        params = lsp.InitializeParams(
            process_id=os.getpid(), root_uri=uri,
            root_path=self.root,
            workspace_folders=[lsp.WorkspaceFolder(uri=uri, name=os.path.basename(self.root))],
            initialization_options=self.spec.initialization,
            capabilities=lsp.ClientCapabilities(
                text_document=lsp.TextDocumentClientCapabilities(
                    publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(),
                    synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
                    hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.PlainText]),
                    document_symbol=lsp.DocumentSymbolClientCapabilities(
                        hierarchical_document_symbol_support=True
                    ),
                ),
                workspace=lsp.WorkspaceClientCapabilities(configuration=True),
            ),
        )  # fmt: skip
        await self.request(lsp.INITIALIZE, params, wait=self._limits().start_timeout)
        await self.notify(lsp.INITIALIZED, lsp.InitializedParams())

    async def _until_idle(self) -> None:
        while True:
            deadline = self.last_used + self._limits().idle_timeout
            if self._busy or self._pending:
                deadline = max(deadline, trio.current_time() + self._limits().idle_timeout)
            elif trio.current_time() >= deadline:
                return
            await trio.sleep_until(deadline)

    async def _shut_down(self) -> None:
        from lsprotocol import types as lsp  # deferred: importing it takes ~0.3-1 s

        with trio.move_on_after(_CLOSE_GRACE):
            try:
                await self.request(lsp.SHUTDOWN, None, wait=_CLOSE_GRACE)
                await self.notify(lsp.EXIT, None)
            except LspError:
                return

    def kill(self) -> None:
        """Kill the process, as a crash would (used by operators and tests)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass

    def describe(self) -> Mapping[str, Any]:
        """The state shown by ``GET /lsp``'s LSPStatus (plus pid and counters)."""
        return {"name": self.spec.name, "root": self.root, "status": self.status,
                "pid": self.pid, "restarts": self.restarts}  # fmt: skip


@cache
def converter() -> Converter:
    """lsprotocol's converter (made at first use: importing lsprotocol is slow)."""
    from lsprotocol.converters import get_converter

    return get_converter()


def _plain(params: Any) -> Any:
    return params if params is None or isinstance(params, dict) else converter().unstructure(params)


def _uri(path: str) -> str:
    from pathlib import Path

    return Path(path).resolve().as_uri()


async def _reap(process: trio.Process, *, graceful: bool) -> None:
    """Wait for *process* (shielded): after a shutdown, a short grace before killing it;
    otherwise (a crash, a cancellation) kill it at once."""
    with trio.CancelScope(shield=True):
        if graceful:
            with trio.move_on_after(_CLOSE_GRACE):
                await process.wait()
                return
        if process.returncode is None:
            process.kill()
        await process.wait()
