"""JSON-RPC 2.0 over newline-delimited JSON on a pair of trio byte streams (ACP's stdio
transport): both sides send requests, responses and notifications, one message per line.

The reader decodes each line's envelope once (``params`` and ``result`` stay raw until a
handler decodes them to its own type); every request runs in a task of its own, so a
notification (``session/cancel``) or a response to the agent's own request is read while
a long request (``session/prompt``) runs. Everything written goes through one bounded queue
and one writer task, so a message is never interleaved with another or cut by a
cancellation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import msgspec
import trio
from msgspec import UNSET, UnsetType

from gateway.acp._wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
)

__all__ = [
    "Connection",
    "DEFAULT_CLOSE_GRACE",
    "DEFAULT_MAX_LINE",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_MAX_REQUESTS",
    "Method",
    "RpcError",
    "Then",
]

_log = logging.getLogger("kittiwake.acp")
DEFAULT_MAX_LINE: Final = 32 * 1024 * 1024
"""Longest message read (bytes): a prompt may embed images and files."""
DEFAULT_MAX_PENDING: Final = 1024
"""Messages queued for the writer before senders wait."""
DEFAULT_MAX_REQUESTS: Final = 64
"""The client's requests handled at once; past it a request is answered with an error."""
DEFAULT_CLOSE_GRACE: Final = 5.0
"""Seconds requests still running when the input ends get to answer."""
_READ: Final = 65536
_CANCEL_REQUEST: Final = "$/cancel_request"
P = TypeVar("P")
Id = int | str | None


class RpcError(Exception):
    """A JSON-RPC error: answered to the client's request, or the client's answer to ours."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class _ErrorBody(msgspec.Struct, frozen=True, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _Envelope(msgspec.Struct, frozen=True):
    """One message as read: a request (``method`` and ``id``), a notification (``method``
    without ``id``) or a response (``id`` with ``result`` or ``error``)."""

    jsonrpc: str
    id: Id | UnsetType = UNSET
    method: str | UnsetType = UNSET
    params: msgspec.Raw | UnsetType = UNSET
    result: msgspec.Raw | UnsetType = UNSET
    error: _ErrorBody | UnsetType = UNSET


class _Request(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: Id
    method: str
    params: Any = None


class _Notification(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: Any = None


class _Result(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: Id
    result: Any


class _Error(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: Id
    error: _ErrorBody


class _CancelRequest(msgspec.Struct, frozen=True, rename="camel"):
    request_id: int | str


@dataclass(frozen=True, slots=True)
class Then:
    """A handler's answer and what it does once the answer is queued: notifications the
    client must get after it knows the answer (a new session's commands)."""

    result: Any
    after: Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Method(Generic[P]):
    """A method the client may call: its parameters' type and its handler, which returns
    what to answer (a Struct, ``None`` for ``{}``) or raises ``RpcError``."""

    params: type[P]
    handler: Callable[[P], Awaitable[Any]]


@dataclass(slots=True)
class _Pending:
    done: trio.Event
    result: msgspec.Raw | None = None
    error: _ErrorBody | None = None


_encode = msgspec.json.Encoder().encode
_decode_envelope = msgspec.json.Decoder(_Envelope).decode


class Connection:
    """One JSON-RPC peer on *receive* (lines in) and *send* (lines out).

    Args:
        max_line: longest line read, in bytes; a longer one is answered with a parse
            error and skipped to its end.
        max_pending: messages queued for writing before senders wait.
        max_requests: the peer's requests handled at once; more are answered with an
            error (the reader never waits, so responses to the agent's own requests are
            always read).
        close_grace: seconds the requests still running at the input's end get to
            answer, and the answers to be written, before they are cancelled.
    """

    def __init__(
        self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, *,
        max_line: int = DEFAULT_MAX_LINE, max_pending: int = DEFAULT_MAX_PENDING,
        max_requests: int = DEFAULT_MAX_REQUESTS, close_grace: float = DEFAULT_CLOSE_GRACE,
    ) -> None:  # fmt: skip
        self._receive = receive
        self._output = send
        self._max_line = max_line
        self._max_requests = max_requests
        self._out, self._queued = trio.open_memory_channel[bytes](max_pending)
        self._pending: dict[int, _Pending] = {}
        self._running: dict[Id, trio.CancelScope] = {}
        self._settled = trio.Event()
        self._close_grace = close_grace
        self._next_id = 0
        self._methods: Mapping[str, Method[Any]] = {}
        self._notifications: Mapping[str, Method[Any]] = {}
        self._nursery: trio.Nursery | None = None

    # -- serving --------------------------------------------------------------------------

    async def serve(
        self, methods: Mapping[str, Method[Any]], notifications: Mapping[str, Method[Any]]
    ) -> None:
        """Read and answer messages until the input ends or the output breaks.

        At the input's end, the requests still running get ``close_grace`` seconds to
        answer (their answers are written), then they are cancelled. Cancellation stops
        everything at once.
        """
        self._methods, self._notifications = methods, notifications
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            written = trio.Event()
            nursery.start_soon(self._writer, nursery.cancel_scope, written)
            await self._reader()
            with trio.move_on_after(self._close_grace):
                while self._running:
                    await self._settled.wait()
                    self._settled = trio.Event()
            self._out.close()
            with trio.move_on_after(self._close_grace):
                await written.wait()
            nursery.cancel_scope.cancel()

    async def _writer(self, everything: trio.CancelScope, written: trio.Event) -> None:
        try:
            async for line in self._queued:
                try:
                    await self._output.send_all(line)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    _log.info("the client stopped reading; closing")
                    everything.cancel()
                    return
        finally:
            written.set()

    async def _reader(self) -> None:
        buffer = bytearray()
        skipping = False
        while True:
            try:
                chunk = await self._receive.receive_some(_READ)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not chunk:
                return
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                piece = chunk[start:end]
                start = end + 1
                if skipping:
                    skipping = False
                    buffer.clear()
                    continue
                if len(buffer) + len(piece) > self._max_line:
                    buffer.clear()
                    await self._send_error(
                        None, PARSE_ERROR, f"Message over {self._max_line} bytes"
                    )
                    continue
                buffer += piece
                line = bytes(buffer)
                buffer.clear()
                await self._line(line)
            if not skipping:
                buffer += chunk[start:]
                if len(buffer) > self._max_line:
                    buffer.clear()
                    skipping = True
                    await self._send_error(
                        None, PARSE_ERROR, f"Message over {self._max_line} bytes"
                    )

    async def _line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = _decode_envelope(line)
        except msgspec.ValidationError as exc:
            await self._send_error(None, INVALID_REQUEST, f"Invalid request: {exc}")
            return
        except msgspec.DecodeError as exc:
            await self._send_error(None, PARSE_ERROR, f"Parse error: {exc}")
            return
        if message.jsonrpc != "2.0":
            await self._send_error(_id(message), INVALID_REQUEST, 'jsonrpc must be "2.0"')
        elif isinstance(message.method, str):
            await self._start(message, message.method)
        elif not isinstance(message.id, UnsetType) and (
            message.result is not UNSET or message.error is not UNSET
        ):
            self._answered(message)
        else:
            await self._send_error(_id(message), INVALID_REQUEST, "Not a request or response")

    async def _start(self, message: _Envelope, method: str) -> None:
        assert self._nursery is not None
        params = message.params if isinstance(message.params, msgspec.Raw) else None
        if isinstance(message.id, UnsetType):  # a notification: never answered
            if method == _CANCEL_REQUEST:
                self._cancel_request(params)
                return
            notified = self._notifications.get(method)
            if notified is None:
                _log.debug("ignored notification %s", method)
                return
            self._nursery.start_soon(self._notified, method, notified, params)
            return
        request_id = message.id
        found = self._methods.get(method)
        if found is None:
            await self._send_error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")
        elif len(self._running) >= self._max_requests or request_id in self._running:
            reason = (
                f"Request id {request_id!r} is in use"
                if request_id in self._running
                else f"Too many requests at once (at most {self._max_requests})"
            )
            await self._send_error(request_id, INVALID_REQUEST, reason)
        else:
            scope = trio.CancelScope()
            self._running[request_id] = scope
            self._nursery.start_soon(self._answer, request_id, method, found, params, scope)

    async def _answer(
        self, request_id: Id, method: str, found: Method[Any], params: msgspec.Raw | None,
        scope: trio.CancelScope,
    ) -> None:  # fmt: skip
        try:
            after = None
            with scope:
                try:
                    result = await found.handler(_params(params, found.params))
                except RpcError as exc:
                    await self._send_error(request_id, exc.code, exc.message, exc.data)
                    return
                except Exception as exc:
                    _log.exception("%s failed", method)
                    await self._send_error(request_id, INTERNAL_ERROR, f"Internal error: {exc}")
                    return
                if isinstance(result, Then):
                    result, after = result.result, result.after
                await self._send(_Result(id=request_id, result={} if result is None else result))
            if scope.cancelled_caught:  # the client's $/cancel_request
                await self._send_error(request_id, REQUEST_CANCELLED, "Request cancelled")
            elif after is not None:
                try:
                    await after()
                except Exception:
                    _log.exception("after answering %s", method)
        finally:
            self._running.pop(request_id, None)
            self._settled.set()

    async def _notified(self, method: str, found: Method[Any], params: msgspec.Raw | None) -> None:
        try:
            await found.handler(_params(params, found.params))
        except RpcError as exc:
            _log.warning("notification %s refused: %s", method, exc.message)
        except Exception:
            _log.exception("notification %s failed", method)

    def _cancel_request(self, params: msgspec.Raw | None) -> None:
        try:
            cancel = _params(params, _CancelRequest)
        except RpcError:
            return
        scope = self._running.get(cancel.request_id)
        if scope is not None:
            scope.cancel()

    def _answered(self, message: _Envelope) -> None:
        pending = self._pending.pop(message.id, None) if isinstance(message.id, int) else None
        if pending is None:
            _log.debug("a response to no request of ours: %r", message.id)
            return
        if isinstance(message.error, _ErrorBody):
            pending.error = message.error
        else:
            pending.result = message.result if isinstance(message.result, msgspec.Raw) else None
        pending.done.set()

    def start_soon(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run *fn* beside the requests, until it returns or the connection ends (which
        cancels it); its failure is logged."""
        assert self._nursery is not None, "start_soon is for a connection being served"

        async def run() -> None:
            try:
                await fn()
            except Exception:
                _log.exception("a background task of the connection failed")

        self._nursery.start_soon(run)

    # -- sending --------------------------------------------------------------------------

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification; waits while the writer's queue is full."""
        await self._send(_Notification(method=method, params=params))

    async def request(self, method: str, params: Any, result: type[P]) -> P:
        """Send a request and return its result decoded as *result*.

        Raises ``RpcError``: the client's error answer, or ``INVALID_PARAMS`` for a result
        of another shape. Cancellation stops waiting (a late answer is dropped).
        """
        self._next_id += 1
        request_id = self._next_id
        pending = _Pending(done=trio.Event())
        self._pending[request_id] = pending
        try:
            await self._send(_Request(method=method, id=request_id, params=params))
            await pending.done.wait()
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            body = pending.error
            raise RpcError(body.code, body.message, body.data)
        try:
            return msgspec.json.decode(pending.result or b"null", type=result)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise RpcError(INVALID_PARAMS, f"Unexpected answer to {method}: {exc}") from None

    async def _send(self, message: Any) -> None:
        await self._out.send(_encode(message) + b"\n")

    async def _send_error(self, request_id: Id, code: int, message: str, data: Any = None) -> None:
        await self._send(_Error(id=request_id, error=_ErrorBody(code, message, data)))


def _id(message: _Envelope) -> Id:
    return None if isinstance(message.id, UnsetType) else message.id


def _params(params: msgspec.Raw | None, kind: type[P]) -> P:
    """The raw *params* decoded as *kind* (absent params as ``{}``); ``INVALID_PARAMS``
    otherwise."""
    raw = bytes(params) if params is not None else b""
    try:
        return msgspec.json.decode(raw if raw and raw != b"null" else b"{}", type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None
