"""The Quart-Trio application: its state (``Gateway``), the V2 session routes and ``/doc``.

``create_core`` builds the app from a ``Gateway`` and the rooms that install their routes
on the same table (``gateway.create_app`` is the gateway as served, with all its rooms).
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import trio
from quart import Response, request
from quart_trio import QuartTrio

from actors import Runtime
from gateway._limits import DEFAULT_MAX_BODY
from gateway.http._access import Access, AccessLimits
from gateway.http._access_routes import access_routes
from gateway.http._args import after_arg, int_arg, order_arg, page_json
from gateway.http._export import export_route
from gateway.http._guards import current_grant, install_cors, install_errors, install_guards
from gateway.http._openapi import openapi_document
from gateway.http._routes import (
    JSON,
    NO_CONTENT,
    Answer,
    Named,
    Route,
    RouteTable,
    register,
)
from gateway.http._scope import Scope, project_filter
from gateway.http._share import share_if_auto, share_session, shared_routes, unshare_session
from gateway.http._streams import stream_routes
from gateway.http._wire import (
    AgentBody,
    CreateBody,
    GatewayError,
    ModelBody,
    PermissionCreateBody,
    PermissionReplyBody,
    PromptBody,
    durable_event_json,
    encode,
    find_permission,
    permission_json,
    reply_permission,
)
from gateway.http._ws import WebsocketLimits
from runtime import InputAdmitted, Location, SessionInfo, SessionMessage, SessionNotFoundError
from storage import MessageEntry

__all__ = [
    "DEFAULT_MAX_BODY",
    "JSON",
    "Gateway",
    "Room",
    "create_core",
    "gateway_of",
]

_log = logging.getLogger("kittiwake.gateway")
DEFAULT_HEARTBEAT: Final = 10.0
DEFAULT_SSE_BUFFER: Final = 256
DEFAULT_KNOWN_SESSIONS: Final = 4096
_EXTENSION: Final = "kittiwake"


class Health(msgspec.Struct, frozen=True):
    """``GET /api/health``'s answer."""

    healthy: bool


_HEALTHY: Final = encode(Health(healthy=True))
# OpenCode's ``PermissionV2Request`` shape (``permission_json``).
PERMISSION: Final = Named(
    "PermissionV2Request",
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "sessionID": {"type": "string"},
            "action": {"type": "string"},
            "resources": {"type": "array", "items": {"type": "string"}},
            "metadata": {"type": "object"},
        },
        "required": ["id", "sessionID", "action", "resources"],
    },
)
PERMISSIONS: Final = Named(PERMISSION.name, PERMISSION.schema, array=True)


class Gateway:
    """Per-app state: the runtime, limits, and the open streams to close on shutdown."""

    def __init__(
        self, rt: Runtime, *, password: str | None, heartbeat: float, sse_buffer: int,
        ws_limits: WebsocketLimits, directory: Path, origins: frozenset[str], max_body: int,
        known_sessions: int = DEFAULT_KNOWN_SESSIONS, tokens: bool = False,
        access_limits: AccessLimits | None = None,
    ) -> None:  # fmt: skip
        self.rt = rt
        self.password = password
        self.access = Access(
            rt.storage, password=password, tokens=tokens, limits=access_limits or AccessLimits()
        )
        """Who may do what (``gateway.http._access``): tokens, the password, the audit."""
        self.scope = Scope(rt, size=known_sessions)
        """What a grant of one project sees (``gateway.http._scope``)."""
        self.origins = origins
        self.max_body = max_body
        self.heartbeat = heartbeat
        self.sse_buffer = sse_buffer
        self.ws_limits = ws_limits
        self.directory = directory
        self.streams: set[trio.CancelScope] = set()
        self.routes: tuple[Route, ...] = ()
        self.closing = False
        self._known: OrderedDict[str, None] = OrderedDict()
        self._known_limit = known_sessions
        self.observers: list[Callable[[Any], None]] = []
        """Hub observers the rooms add (``EventHub.add_observer``), observing while served."""
        self.background: list[Callable[[trio.Event], Awaitable[None]]] = []
        if tokens:
            self.background.append(self.access.recheck)
        """Tasks the rooms run while served, each given the event that stops serving."""

    async def check_session(self, session_id: str) -> None:
        """Raise ``SessionNotFoundError`` unless the session exists.

        The last ``known_sessions`` ids seen to exist are remembered and not looked up in
        the store again; a deletion through the gateway forgets its id (``forget``). A
        session whose actor is active, or that was created in this process and is
        unchanged since, is not looked up the first time either
        (``SessionExecution.known_info``).
        Cancellation abandons the lookup.
        """
        if session_id in self._known:
            self._known.move_to_end(session_id)
            return
        if self.rt.execution.known_info(session_id) is None:
            await self.rt.sessions.get(session_id)
        self._known[session_id] = None
        if len(self._known) > self._known_limit:
            self._known.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Stop remembering a deleted session as existing."""
        self._known.pop(session_id, None)

    def close_streams(self) -> None:
        """End every open SSE stream and websocket; new ones are refused from now on."""
        self.closing = True
        for scope in list(self.streams):
            scope.cancel()


def gateway_of(app: QuartTrio) -> Gateway:
    gw: Gateway = app.extensions[_EXTENSION]
    return gw


Room = Callable[[RouteTable, QuartTrio], None]
"""A surface's installer: adds its routes to the core's table (and its observers and
background tasks to the ``Gateway``) when the app is built."""


def create_core(gw: Gateway, rooms: Sequence[Room] = ()) -> QuartTrio:
    """Build the app serving *gw*: the V2 session routes, the streams, ``/doc``, then each
    of *rooms* in turn. Nothing runs until Hypercorn serves it (``serve_app``)."""
    app = QuartTrio("kittiwake", static_folder=None)  # every page is inline; no /static
    app.config["MAX_CONTENT_LENGTH"] = gw.max_body
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = True
    app.extensions[_EXTENSION] = gw
    install_guards(app, gw)
    install_errors(app, gw.max_body)
    table = RouteTable()
    _session_routes(table, gw)
    stream_routes(table, app, gw)
    export_route(table, gw)
    shared_routes(table, app, gw)
    _doc_route(table, gw)
    access_routes(table, gw)
    for room in rooms:
        room(table, app)
    gw.routes = tuple(table.routes)
    register(app, table.routes)
    install_cors(app, gw.origins, table.routes)
    return app


def _json(body: Any, *, status: int = 200) -> Response:
    return Response(encode(body), status=status, content_type=JSON)


def _no_content() -> Response:
    return Response(b"", status=204)


# -- V2 session routes --------------------------------------------------------------------


def _session_routes(table: RouteTable, gw: Gateway) -> None:
    rt = gw.rt

    @table.get("/api/health", "v2.health.get", "Health", answer=Answer(type=Health))
    async def health() -> Response:
        return Response(_HEALTHY, content_type=JSON)

    @table.get(
        "/api/session", "v2.session.list", "List sessions",
        answer=Answer(type=SessionInfo, envelope="page"), query=("limit", "cursor", "order"),
        errors=("InvalidRequestError", "InvalidCursorError"),
    )  # fmt: skip
    async def list_sessions() -> Response:
        limit = int_arg("limit", 50)
        if order_arg() == "asc":
            raise GatewayError("InvalidRequestError", "sessions are listed newest first only")
        page = await rt.sessions.list(
            limit=limit, cursor=request.args.get("cursor"),
            project_id=project_filter(current_grant()),
        )  # fmt: skip
        return _json(page_json(page.data, page.previous, page.next))

    @table.get(
        "/api/session/active", "v2.session.active", "Sessions whose drain runs now",
        answer=Answer(type=dict[str, Any]),
    )  # fmt: skip
    async def active_sessions() -> Response:
        return _json({"data": {sid: {"type": "running"} for sid in rt.sessions.active()}})

    @table.get(
        "/api/session/{sessionID}/history", "v2.session.history",
        "One page of durable events after a seq", answer=Answer(type=dict[str, Any]),
        query=("after", "limit"), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def history(session_id: str) -> Response:
        page, more = await rt.sessions.history(
            session_id, after=after_arg(), limit=int_arg("limit", 100)
        )
        return _json({"data": [durable_event_json(item) for item in page], "hasMore": more})

    @table.post(
        "/api/session", "v2.session.create", "Create a session",
        body=CreateBody, answer=Answer(type=SessionInfo, envelope="data"),
        errors=("ConflictError",),
        empty_ok=True,
    )  # fmt: skip
    async def create_session(body: CreateBody) -> Response:
        location = body.location or Location(directory=str(gw.directory))
        if body.location is not None and Path(location.directory).is_absolute():
            await gw.scope.check_directory(current_grant(), location.directory)
        info = await rt.sessions.create(
            id=body.id, location=location, agent=body.agent, model=body.model, title=body.title
        )
        await rt.projects.registered(info.location.directory)
        return _json({"data": await share_if_auto(gw, info)})

    @table.get(
        "/api/session/{sessionID}", "v2.session.get", "Get a session",
        answer=Answer(type=SessionInfo, envelope="data"),
    )  # fmt: skip
    async def get_session(session_id: str) -> Response:
        return _json({"data": await rt.sessions.get(session_id)})

    @table.post(
        "/api/session/{sessionID}/prompt", "v2.session.prompt", "Admit a prompt",
        body=PromptBody, answer=Answer(type=InputAdmitted, envelope="data"),
        errors=("ConflictError", "ServiceUnavailableError"),
    )  # fmt: skip
    async def prompt(body: PromptBody, session_id: str) -> Response:
        """Admit the body durably; the receipt. Cancellation before the runtime acknowledges
        the write leaves the prompt admitted or not, never half-written (an exact retry is
        safe). A required plugin whose ``chat_message`` failed refuses it (503)."""
        receipt = await rt.sessions.prompt(
            session_id, prompt=body.prompt, id=body.id, delivery=body.delivery,
            resume=body.resume,
        )  # fmt: skip
        return _json({"data": receipt})

    @table.post(
        "/api/session/{sessionID}/interrupt", "v2.session.interrupt", "Interrupt",
        answer=NO_CONTENT,
    )  # fmt: skip
    async def interrupt(session_id: str) -> Response:
        await gw.check_session(session_id)
        await rt.sessions.interrupt(session_id)
        return _no_content()

    @table.post(
        "/api/session/{sessionID}/resume", "kittiwake.session.resume",
        "Resume a session a crash cut short (409 if not needed)", answer=NO_CONTENT,
        errors=("ResumeNotNeededError",),
    )  # fmt: skip
    async def resume(session_id: str) -> Response:
        await rt.sessions.resume(session_id, wait=False, if_needed=True)
        return _no_content()

    @table.post(
        "/api/session/{sessionID}/wait", "v2.session.wait", "Wait until idle",
        answer=NO_CONTENT,
    )  # fmt: skip
    async def wait(session_id: str) -> Response:
        """Return once the session is idle; cancellation stops waiting, changing nothing."""
        await gw.check_session(session_id)
        await rt.sessions.wait_idle(session_id)
        return _no_content()

    @table.post(
        "/api/session/{sessionID}/compact", "v2.session.compact",
        "Compact at the next safe boundary (now, when idle)", answer=NO_CONTENT,
    )  # fmt: skip
    async def compact(session_id: str) -> Response:
        await rt.sessions.compact(session_id)
        return _no_content()

    @table.post(
        "/api/session/{sessionID}/agent", "v2.session.switchAgent", "Switch agent",
        body=AgentBody, answer=NO_CONTENT, errors=("InvalidRequestError",),
    )  # fmt: skip
    async def switch_agent(body: AgentBody, session_id: str) -> Response:
        await gw.check_session(session_id)
        await rt.sessions.switch_agent(session_id, body.agent)
        return _no_content()

    @table.post(
        "/api/session/{sessionID}/model", "v2.session.switchModel", "Switch model",
        body=ModelBody, answer=NO_CONTENT, errors=("InvalidRequestError",),
    )  # fmt: skip
    async def switch_model(body: ModelBody, session_id: str) -> Response:
        await gw.check_session(session_id)
        await rt.sessions.switch_model(session_id, body.model)
        return _no_content()

    @table.get(
        "/api/session/{sessionID}/context", "v2.session.context", "Model-visible history",
        answer=Answer(type=list[SessionMessage], envelope="data"),
    )  # fmt: skip
    async def context(session_id: str) -> Response:
        return _json({"data": await rt.sessions.context(session_id)})

    @table.get(
        "/api/session/{sessionID}/message", "v2.session.messages", "Messages",
        answer=Answer(type=SessionMessage, envelope="page"), query=("limit", "order", "cursor"),
        errors=("InvalidRequestError", "InvalidCursorError"),
    )  # fmt: skip
    async def messages(session_id: str) -> Response:
        limit = int_arg("limit", 50)
        order = order_arg()
        cursor = request.args.get("cursor")
        if cursor is not None and order is not None:
            raise GatewayError("InvalidRequestError", "Do not combine cursor with order")
        page = await rt.sessions.messages(
            session_id, limit=limit, order=order or "desc", cursor=cursor
        )
        return _json(page_json(page.data, page.previous, page.next))

    @table.get(
        "/api/session/{sessionID}/message/{messageID}", "v2.session.message", "One message",
        answer=Answer(type=SessionMessage, envelope="data"), errors=("MessageNotFoundError",),
    )  # fmt: skip
    async def message(session_id: str, message_id: str) -> Response:
        await gw.check_session(session_id)
        entry = await rt.storage.read(MessageEntry(message_id=message_id))
        if entry is None or entry[0] != session_id:
            raise GatewayError(
                "MessageNotFoundError", f"Message not found: {message_id}",
                sessionID=session_id, messageID=message_id,
            )  # fmt: skip
        return _json({"data": entry[2]})

    @table.get(
        "/api/session/{sessionID}/permission", "v2.session.permission.list",
        "Pending permission requests", answer=Answer(type=PERMISSIONS, envelope="data"),
    )  # fmt: skip
    async def permissions(session_id: str) -> Response:
        # The session's own, then those of the subagent children running under its tasks.
        pending = [p for p in await rt.sessions.permissions(session_id) if p.status == "pending"]
        for child in rt.tools.running_descendants(session_id):
            with contextlib.suppress(SessionNotFoundError):  # deleted meanwhile
                pending += [
                    p for p in await rt.sessions.permissions(child) if p.status == "pending"
                ]
        return _json({"data": [permission_json(p) for p in pending]})

    @table.post(
        "/api/session/{sessionID}/permission", "v2.session.permission.create",
        "Evaluate a permission; record a pending request when it needs approval",
        body=PermissionCreateBody, answer=Answer(type=dict[str, Any]),
        errors=("ConflictError",),
    )  # fmt: skip
    async def create_permission(body: PermissionCreateBody, session_id: str) -> Response:
        source = body.source
        request_id, effect = await rt.sessions.create_permission(
            session_id, action=body.action, resources=body.resources, agent=body.agent,
            id=body.id, save=body.save, metadata=body.metadata,
            message_id=source.messageID if source else None,
            call_id=source.callID if source else None,
        )  # fmt: skip
        return _json({"data": {"id": request_id, "effect": effect}})

    @table.get(
        "/api/session/{sessionID}/permission/{requestID}", "v2.session.permission.get",
        "One permission request", answer=Answer(type=PERMISSION, envelope="data"),
        errors=("PermissionNotFoundError",),
    )  # fmt: skip
    async def permission(session_id: str, request_id: str) -> Response:
        return _json({"data": permission_json(await find_permission(rt, session_id, request_id))})

    @table.post(
        "/api/session/{sessionID}/permission/{requestID}/reply",
        "v2.session.permission.reply", "Answer a permission request", body=PermissionReplyBody,
        answer=NO_CONTENT, errors=("PermissionNotFoundError", "ConflictError"),
    )  # fmt: skip
    async def reply(body: PermissionReplyBody, session_id: str, request_id: str) -> Response:
        await reply_permission(rt, session_id, request_id, body)
        return _no_content()

    @table.post(
        "/api/session/{sessionID}/share", "kittiwake.session.share",
        "Share the session: a read-only link on this server (docs/web.md)",
        answer=Answer(type=SessionInfo, envelope="data"), errors=("BadRequest",),
    )  # fmt: skip
    async def share(session_id: str) -> Response:
        info = await share_session(gw, session_id)
        return _json({"data": info})

    @table.delete(
        "/api/session/{sessionID}/share", "kittiwake.session.unshare",
        "Unshare the session: its link stops working",
        answer=Answer(type=SessionInfo, envelope="data"),
    )  # fmt: skip
    async def unshare(session_id: str) -> Response:
        return _json({"data": await unshare_session(gw, session_id)})


def _doc_route(table: RouteTable, gw: Gateway) -> None:
    document: dict[str, Any] = {}

    @table.get("/doc", "kittiwake.doc", "This document", answer=Answer(type=dict[str, Any]))
    async def doc() -> Response:
        if not document:
            document.update(openapi_document(gw.routes))
        return _json(document)
