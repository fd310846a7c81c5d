"""``Backend`` over a running ``kittiwake serve``: its public HTTP API (V2 session routes,
the catalog routes) and its ``/api/ws`` websocket for a session's events and deltas.

The server runs the sessions' tools; while a prompt runs, the editor's files and
terminals serve them over a websocket of their own (``_remote_io``), and the server
runs the editor's MCP servers over another. The server's refusals come back as the runtime's errors
(``SessionNotFoundError``, ``InvalidInputError``, ...), so the agent answers them as it
does in process.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from actors import SessionEvent
from gateway.acp._backend import (
    Follow,
    Item,
    ModelChoice,
    Offer,
    Reply,
    Settled,
    next_or_idle,
    primary_agents,
)
from gateway.acp._remote_io import remote_io, remote_servers
from runtime import (
    DurableEvent,
    InputAdmitted,
    InvalidInputError,
    KittiwakeError,
    LiveDelta,
    ModelRef,
    Prompt,
    PromptConflictError,
    QuestionNotFoundError,
    SessionInfo,
    SessionNotFoundError,
)
from runtime.agents import AgentInfo, AgentMode, CommandInfo
from runtime.events import PermissionAsked, PermissionInfo
from runtime.mcp import McpServerSpec
from runtime.tools import ToolIO

__all__ = ["AttachedBackend"]

_log = logging.getLogger("kittiwake.acp")
_PAGE: Final = 1000
_FRAMES: Final = 1024
"""Websocket frames read ahead of the agent."""
_ASKED: Final = PermissionAsked.__struct_config__.tag
T = TypeVar("T")


class _Data(msgspec.Struct, Generic[T], frozen=True):
    data: T


class _Cursor(msgspec.Struct, frozen=True):
    next: str | None = None


class _Sessions(msgspec.Struct, frozen=True):
    data: list[SessionInfo]
    cursor: _Cursor = _Cursor()


class _Seq(msgspec.Struct, frozen=True):
    seq: int


class _Durable(msgspec.Struct, frozen=True):
    """OpenCode's ``SessionDurableEvent`` (``durable_event_json``)."""

    id: str
    type: str
    durable: _Seq
    data: dict[str, Any]
    metadata: dict[str, Any] = {}


class _History(msgspec.Struct, rename="camel", frozen=True):
    data: list[_Durable]
    has_more: bool = False


class _Delta(msgspec.Struct, frozen=True):
    type: str
    data: dict[str, Any]


class _Frame(msgspec.Struct, frozen=True):
    """A server frame of ``/api/ws``."""

    type: str
    event: msgspec.Raw = msgspec.Raw(b"")
    error: dict[str, Any] | None = None


class _Agent(msgspec.Struct, frozen=True):
    id: str
    mode: str = "primary"
    description: str | None = None
    model: dict[str, str] | None = None


class _Command(msgspec.Struct, frozen=True):
    name: str
    template: str = ""
    description: str | None = None


class _Limit(msgspec.Struct, frozen=True):
    context: int = 0


class _Model(msgspec.Struct, rename="camel", frozen=True):
    id: str
    provider_id: str = msgspec.field(name="providerID")
    name: str = ""
    enabled: bool = False
    status: str = "active"
    limit: _Limit = _Limit()


class _Kind(msgspec.Struct, frozen=True):
    type: str = ""


class _Permission(msgspec.Struct, frozen=True):
    """OpenCode's ``PermissionV2Request`` as ``permission_json`` writes it."""

    id: str
    session_id: str = msgspec.field(name="sessionID")
    action: str = ""
    resources: list[str] = []
    metadata: dict[str, Any] = {}

    def info(self) -> PermissionInfo:
        meta = self.metadata
        return PermissionInfo(
            id=self.id, session_id=self.session_id, agent=str(meta.get("agent", "")),
            tool=str(meta.get("tool", "")), call_id=str(meta.get("callID", "")),
            permission=self.action, resources=list(self.resources),
            time_created=int(meta.get("timeCreated", 0)),
        )  # fmt: skip


class _Provider(msgspec.Struct, frozen=True):
    id: str
    name: str = ""


def _event(item: _Durable) -> SessionEvent | None:
    """The runtime's event of a durable event as the server sends it; ``None`` for one it
    sends abridged (a revert's files, listed by path), which nothing here shows."""
    fields = {**item.data, **item.metadata, "type": item.type}
    try:
        event = msgspec.convert(fields, DurableEvent)
    except msgspec.ValidationError:
        return None
    return SessionEvent(seq=item.durable.seq, id=item.id, event=event)


def _refusal(response: httpx.Response) -> KittiwakeError:
    """The runtime's error for the server's ``{"_tag", "message", ...}`` answer."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    tag = body.get("_tag", "") if isinstance(body, dict) else ""
    message = body.get("message", response.text) if isinstance(body, dict) else response.text
    if tag == "SessionNotFoundError":
        return SessionNotFoundError(body.get("sessionID", ""))
    if tag == "QuestionNotFoundError":
        return QuestionNotFoundError(body.get("requestID", ""))
    if tag in ("InvalidRequestError", "InvalidInputError", "MessageNotFoundError"):
        return InvalidInputError(message)
    if tag == "ConflictError":
        return PromptConflictError(message)
    return KittiwakeError(f"{tag or response.status_code}: {message}")


class AttachedBackend:
    """``Backend`` over the server at *url*, sending *authorization* (the ``Authorization``
    header: a bearer token or basic auth) on its websocket, if any.

    *client* is the HTTP client to it (``base_url`` set, no read timeout: ``/wait`` lasts
    as long as the run); the caller closes it.
    """

    def __init__(self, client: httpx.AsyncClient, *, authorization: str | None = None) -> None:
        self._http = client
        self._authorization = authorization
        parts = urlsplit(str(client.base_url))
        scheme = "wss" if parts.scheme == "https" else "ws"
        self._ws_url = urlunsplit((scheme, parts.netloc, "/api/ws", "", ""))

    async def _call(self, method: str, path: str, kind: type[T], **options: Any) -> T:
        response = await self._http.request(method, path, **options)
        if response.status_code >= 400:
            raise _refusal(response)
        return msgspec.json.decode(response.content or b"null", type=kind)

    async def create(self, directory: str) -> SessionInfo:
        body = {"location": {"directory": directory}}
        return (await self._call("POST", "/api/session", _Data[SessionInfo], json=body)).data

    async def get(self, session_id: str) -> SessionInfo:
        return (await self._call("GET", f"/api/session/{session_id}", _Data[SessionInfo])).data

    async def sessions(
        self, limit: int, cursor: str | None
    ) -> tuple[list[SessionInfo], str | None]:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        page = await self._call("GET", "/api/session", _Sessions, params=params)
        return page.data, page.cursor.next

    async def fork(self, session_id: str) -> SessionInfo:
        made = await self._call("POST", f"/session/{session_id}/fork", dict[str, Any], json={})
        return await self.get(str(made["id"]))

    async def delete(self, session_id: str) -> None:
        await self.get(session_id)  # an unknown session in the V2 routes' error shape
        await self._call("DELETE", f"/session/{session_id}", Any)

    async def prompt(
        self, session_id: str, prompt: Prompt, *, id: str | None = None
    ) -> InputAdmitted:
        body: dict[str, Any] = {"prompt": msgspec.to_builtins(prompt)}
        if id is not None:
            body["id"] = id  # an exact retry answers the stored receipt (200)
        path = f"/api/session/{session_id}/prompt"
        return (await self._call("POST", path, _Data[InputAdmitted], json=body)).data

    async def command(self, session_id: str, name: str, arguments: str) -> InputAdmitted:
        body = {"command": name, "arguments": arguments}
        path = f"/api/session/{session_id}/command"
        return (await self._call("POST", path, _Data[InputAdmitted], json=body)).data

    async def interrupt(self, session_id: str) -> None:
        await self._call("POST", f"/api/session/{session_id}/interrupt", object)

    async def busy(self, session_id: str) -> bool:
        active = await self._call("GET", "/api/session/active", _Data[dict[str, Any]])
        return session_id in active.data

    async def wait_idle(self, session_id: str) -> None:
        await self._call("POST", f"/api/session/{session_id}/wait", object)

    async def history(self, session_id: str, after: int) -> tuple[list[SessionEvent], bool]:
        params = {"after": after, "limit": _PAGE}
        page = await self._call(
            "GET", f"/api/session/{session_id}/history", _History, params=params
        )
        events = [e for e in (_event(item) for item in page.data) if e is not None]
        return events, page.has_more

    def _headers(self) -> list[tuple[bytes, bytes]]:
        """The websocket's upgrade headers: the ``Authorization`` (password or token), if any."""
        if not self._authorization:
            return []
        return [(b"Authorization", self._authorization.encode())]

    @asynccontextmanager
    async def follow(self, session_id: str, after: int | None) -> AsyncIterator[Follow]:
        """The session subscribed on the server's websocket from seq *after* on (read from
        its history when not known), so its deltas flow before the work starts."""
        if after is None:
            after, more = 0, True
            while more:
                page, more = await self.history(session_id, after)
                after = page[-1].seq if page else after
        async with open_websocket_url(self._ws_url, extra_headers=self._headers()) as ws:
            ask = {"type": "subscribe", "ref": 1, "sessionID": session_id, "after": after}
            await ws.send_message(msgspec.json.encode(ask).decode())
            follow = _SocketFollow(self, session_id, ws)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow.read)
                yield follow
                nursery.cancel_scope.cancel()

    async def descendant_asks(self, session_id: str) -> AsyncGenerator[PermissionInfo, None]:
        """Over the server's ``GET /api/event`` (every session's events): each
        ``permission.v2.asked`` there has the session's pending requests listed again
        (``GET /api/session/{id}/permission`` lists its running children's too)."""
        seen: set[str] = set()
        async with self._http.stream("GET", "/api/event") as stream:
            lines = stream.aiter_lines()
            stale = True
            while True:
                if stale:
                    path = f"/api/session/{session_id}/permission"
                    pending = await self._call("GET", path, _Data[list[_Permission]])
                    for asked in pending.data:
                        if asked.session_id != session_id and asked.id not in seen:
                            seen.add(asked.id)
                            yield asked.info()
                line = await anext(lines)
                stale = False
                if line.startswith("data:"):
                    kind = msgspec.json.decode(line[5:], type=_Kind).type
                    stale = kind == _ASKED

    async def reply_permission(self, session_id: str, request_id: str, reply: Reply) -> None:
        path = f"/api/session/{session_id}/permission/{request_id}/reply"
        await self._call("POST", path, object, json={"reply": reply})

    async def reply_question(
        self, session_id: str, request_id: str, answers: list[list[str]]
    ) -> None:
        path = f"/api/session/{session_id}/question/{request_id}/reply"
        await self._call("POST", path, object, json={"answers": answers})

    async def reject_question(self, session_id: str, request_id: str) -> None:
        path = f"/api/session/{session_id}/question/{request_id}/reject"
        await self._call("POST", path, object)

    async def switch_agent(self, session_id: str, agent: str) -> SessionInfo:
        await self._call("POST", f"/api/session/{session_id}/agent", object, json={"agent": agent})
        return await self.get(session_id)

    async def switch_model(self, session_id: str, model: ModelRef) -> SessionInfo:
        body = {"model": msgspec.to_builtins(model)}
        await self._call("POST", f"/api/session/{session_id}/model", object, json=body)
        return await self.get(session_id)

    async def offer(self, directory: str) -> Offer:
        located = {"location[directory]": directory}
        agents = await self._call("GET", "/api/agent", _Data[list[_Agent]], params=located)
        commands = await self._call("GET", "/api/command", _Data[list[_Command]], params=located)
        models = await self._call("GET", "/api/model", _Data[list[_Model]], params=located)
        providers = await self._call("GET", "/api/provider", _Data[list[_Provider]], params=located)
        config = await self._call("GET", "/config", dict[str, Any], params={"directory": directory})
        names = {p.id: p.name for p in providers.data}
        model = ModelRef.parse(config.get("model") if isinstance(config, dict) else None)
        return Offer(
            agents=primary_agents([_agent(a) for a in agents.data]),
            commands=[
                CommandInfo(name=c.name, template=c.template, description=c.description)
                for c in commands.data
            ],
            models=[
                ModelChoice(
                    ref=ModelRef(id=m.id, provider_id=m.provider_id),
                    name=f"{names.get(m.provider_id, m.provider_id)}: {m.name or m.id}",
                    context=m.limit.context or None,
                )
                for m in models.data
                if m.enabled and m.status != "deprecated"
            ],
            model=model or ModelRef(id="default", provider_id="kittiwake"),
        )  # fmt: skip

    def route_io(self, session_id: str, io: ToolIO) -> AbstractAsyncContextManager[None]:
        return remote_io(self._ws_url, self._headers(), session_id, io)

    def mcp_servers(
        self, session_id: str, specs: Mapping[str, McpServerSpec]
    ) -> AbstractAsyncContextManager[Settled]:
        return remote_servers(self._ws_url, self._headers(), session_id, specs)


def _agent(agent: _Agent) -> AgentInfo:
    model = agent.model or {}
    named = f"{model['providerID']}/{model['id']}" if "providerID" in model else None
    mode: AgentMode = "subagent" if agent.mode == "subagent" else "primary"
    return AgentInfo(name=agent.id, mode=mode, description=agent.description, model=named)


class _SocketFollow:
    """One session subscribed on the server's websocket: its durable events (gapless, from
    the seq subscribed) and its deltas (dropped by the server when the connection is behind),
    read ahead into a bounded channel from the moment of subscribing."""

    def __init__(self, backend: AttachedBackend, session_id: str, ws: WebSocketConnection):
        self._backend = backend
        self._session = session_id
        self._ws = ws
        self._send, self._receive = trio.open_memory_channel[_Frame](_FRAMES)

    async def read(self) -> None:
        async with self._send:
            try:
                while True:
                    message = await self._ws.get_message()
                    await self._send.send(msgspec.json.decode(message, type=_Frame))
            except ConnectionClosed:
                _log.info("the server closed the event stream of %s", self._session)

    async def items(
        self, after: int, idle: trio.Event, *, behind: bool = False
    ) -> AsyncGenerator[Item, None]:
        cursor = after  # (the server replays what came after the seq subscribed from)
        while True:
            frame = await next_or_idle(self._receive, idle)
            if frame is None:  # idle (or the socket closed): the rest is in the history
                more = True
                while more:
                    page, more = await self._backend.history(self._session, cursor)
                    for event in page:
                        cursor = event.seq
                        yield event
                if idle.is_set():
                    return
                continue
            if frame.type == "deleted":
                return
            if frame.type == "reply" and frame.error is not None:
                raise SessionNotFoundError(self._session)
            if not frame.event:
                continue
            if frame.type == "event":
                item = _event(msgspec.json.decode(frame.event, type=_Durable))
                if item is not None and item.seq > cursor:
                    cursor = item.seq
                    yield item
            elif frame.type == "delta":
                delta = msgspec.json.decode(frame.event, type=_Delta)
                try:
                    yield msgspec.convert({**delta.data, "type": delta.type}, LiveDelta)
                except msgspec.ValidationError:
                    continue
