"""OpenCode's V1 session routes (``/session...``, ``/permission``), a projection of the
runtime for OpenCode's own clients: the terminal UI, ``opencode run --attach`` and the SDK.

Sessions, messages and permissions are the runtime's; nothing here keeps state of its own
but the busy/idle board the V1 event streams share (``gateway.opencode._v1_events.StatusBoard``) and
the assistant messages being written (``gateway.opencode._v1_live.LiveAnswers``), which the message
list and get add to what the store holds.
The Location of a request is the ``x-opencode-directory`` header (URL-encoded), else the
``directory`` query parameter, else the server's directory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import trio
from quart import Response, request

from gateway.http import (
    Answer,
    GatewayError,
    RouteTable,
    current_grant,
    encode,
    named_directory,
    project_filter,
    request_directory,
    session_json,
    share_if_auto,
    share_session,
    unshare_session,
)
from gateway.opencode._diff import session_diffs
from gateway.opencode._transcript import message_in, replies_to, transcript, transcript_from
from gateway.opencode._v1_live import live_items
from runtime import Location, ModelRef, Prompt, SessionInfo, SessionNotFoundError
from runtime import events as ev

if TYPE_CHECKING:
    from actors import ProjectInfo
    from gateway.http import Gateway
    from gateway.opencode._state import OpenCodeGateway
    from runtime.mcp import McpServers

__all__ = [
    "SETTLE_TIMEOUT",
    "located",
    "location_info",
    "registered_project",
    "v1_session_routes",
]

SETTLE_TIMEOUT: Final = 2.0
"""Seconds a blocking prompt waits, once idle, for the V1 streams to send the idle status."""
_LIST: Final = Answer(type=list[dict[str, Any]])
_OBJECT: Final = Answer(type=dict[str, Any])
_BOOL: Final = Answer(type=bool)


async def location_info(gw: Gateway, directory: Path) -> dict[str, Any]:
    """OpenCode's ``LocationInfo`` of *directory* (existing, resolved): it and its
    project (found, not registered: a read writes nothing)."""
    place = await gw.rt.projects.place(str(directory))
    return {"directory": str(directory),
            "project": {"id": place.id, "directory": place.main}}  # fmt: skip


async def registered_project(gw: Gateway, project_id: str) -> ProjectInfo:
    """The registered project *project_id*; 404 ``NotFoundError`` ``{projectID}`` when
    there is none (every ``/project/{projectID}/...`` route)."""
    found = await gw.rt.projects.get(project_id)
    if found is None:
        raise GatewayError(
            "NotFoundError", f"Project not found: {project_id}", status=404,
            projectID=project_id,
        )  # fmt: skip
    return found


async def located(gw: Gateway) -> tuple[Path, dict[str, Any]]:
    """The directory a V2 request names (``location[directory]``, else as
    ``request_directory``) and its ``LocationInfo``. Raises 400 ``InvalidRequestError``
    when it is not an existing directory."""
    directory = named_directory(gw)
    return directory, await location_info(gw, directory)


class ModelIn(msgspec.Struct, frozen=True, kw_only=True):
    providerID: str
    id: str | None = None
    modelID: str | None = None
    variant: str | None = None

    def ref(self) -> ModelRef:
        model_id = self.modelID or self.id
        if not model_id:
            raise GatewayError("InvalidRequestError", "model needs an id")
        if self.variant:
            return ModelRef(id=model_id, provider_id=self.providerID, variant=self.variant)
        return ModelRef(id=model_id, provider_id=self.providerID)


class SessionCreateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's session create. ``permission`` rules, ``metadata`` and ``workspaceID``
    are accepted and not kept (a session's rules are its agent's)."""

    parentID: str | None = None
    title: str | None = None
    agent: str | None = None
    model: ModelIn | None = None
    metadata: dict[str, Any] | None = None
    permission: list[dict[str, Any]] | None = None
    workspaceID: str | None = None


class SessionUpdateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: str | None = None
    time: dict[str, Any] | None = None
    permission: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None


class PromptIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's ``POST /session/{id}/message`` body. Text parts (synthetic ones too) make
    the prompt's text, file parts its attachments (an MCP resource's is read and put in:
    ``with_resources``), agent parts its agent mentions;
    ``tools``, ``format``, ``system`` and ``noReply`` are accepted and not applied."""

    parts: list[dict[str, Any]]
    messageID: str | None = None
    model: ModelIn | None = None
    agent: str | None = None
    noReply: bool | None = None
    tools: dict[str, bool] | None = None
    format: dict[str, Any] | None = None
    system: str | None = None
    variant: str | None = None


class PermissionReplyIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    reply: Literal["once", "always", "reject"]
    message: str | None = None


class PermissionRespondIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    response: Literal["once", "always", "reject"]


def _json(body: Any, *, status: int = 200) -> Response:
    return Response(encode(body), status=status, content_type="application/json")


def prompt_of(parts: list[dict[str, Any]]) -> Prompt:
    """The runtime's ``Prompt`` of OpenCode's input parts; 400 for an unknown part type."""
    texts: list[str] = []
    files: list[ev.FileAttachment] = []
    agents: list[ev.AgentAttachment] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "file" and isinstance(part.get("url"), str):
            name = part.get("filename")
            files.append(
                ev.FileAttachment(uri=part["url"], mime=str(part.get("mime") or "text/plain"))
                if not isinstance(name, str)
                else ev.FileAttachment(uri=part["url"], mime=str(part.get("mime")), name=name)
            )
        elif kind == "agent" and isinstance(part.get("name"), str):
            agents.append(ev.AgentAttachment(name=part["name"]))
        else:
            raise GatewayError("InvalidRequestError", f"Unsupported message part: {kind!r}")
    return Prompt(text="\n".join(texts), files=files, agents=agents)


def _resource(part: dict[str, Any]) -> tuple[str, str] | None:
    """``(clientName, uri)`` of a file part whose ``source`` is an MCP resource."""
    source = part.get("source")
    if part.get("type") != "file" or not isinstance(source, dict):
        return None
    client, uri = source.get("clientName"), source.get("uri")
    if source.get("type") != "resource" or not isinstance(client, str) or not isinstance(uri, str):
        return None
    return client, uri


async def with_resources(
    parts: list[dict[str, Any]], servers: Callable[[], Awaitable[McpServers]]
) -> list[dict[str, Any]]:
    """*parts* with each MCP resource part (a file part whose ``source`` is
    ``{type: "resource", clientName, uri}``) read from its server and put in as OpenCode
    does at admission: text parts (``Reading MCP resource: ...``, then its text) and its
    blobs as ``data:`` file parts; a resource that cannot be read as a text saying why.
    The Location's servers are looked at only when a part names one (once they are no
    longer connecting). Cancellation propagates."""
    if not any(_resource(p) for p in parts):
        return parts
    mcp = await servers()
    await mcp.settled()
    out: list[dict[str, Any]] = []
    for part in parts:
        found = _resource(part)
        if found is None:
            out.append(part)
            continue
        name = str(part.get("filename") or found[1])
        texts, files = await mcp.attachment(found[0], found[1], name)
        out += [{"type": "text", "text": t, "synthetic": True} for t in texts]
        out += [{"type": "file", "mime": f.mime, "url": f.url, "filename": name} for f in files]
    return out


def _int(name: str, default: int | None) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(float(raw))
    except ValueError:
        raise GatewayError("InvalidRequestError", f"{name} must be a number") from None


def v1_session_routes(table: RouteTable, gw: OpenCodeGateway, *, max_sessions: int,
                      max_messages: int) -> None:  # fmt: skip
    """Declare the V1 session, message and permission routes."""
    rt = gw.rt

    async def every_session() -> list[SessionInfo]:
        """Every session the request's grant sees, newest first, ``max_sessions`` at most."""
        out: list[SessionInfo] = []
        cursor: str | None = None
        only = project_filter(current_grant())
        while len(out) < max_sessions:
            page = await rt.sessions.list(limit=200, cursor=cursor, project_id=only)
            out += [s for s in page.data if isinstance(s, SessionInfo)]
            cursor = page.next
            if cursor is None:
                break
        return out[:max_sessions]

    async def projections(session_id: str, since: str | None = None) -> list[dict[str, Any]]:
        """The stored messages (*since*: from that message on), and the assistant message
        being written when the store does not hold it all yet (taken before the store is
        read, so a step ending meanwhile is in what the store answers)."""
        live = gw.live.held(session_id)
        if since is None:
            items = await transcript(rt, session_id, limit=max_messages)
        else:
            items = await transcript_from(rt, session_id, since, limit=max_messages)
        if live is None:
            return items
        info = await rt.sessions.get(session_id)
        return live_items(items, live, info, rt.execution.default_model)

    @table.get(
        "/session", "session.list", "Sessions, newest first", answer=_LIST,
        query=("directory", "roots", "limit", "search", "start", "path"),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def list_sessions() -> Response:
        directory = (
            str(request_directory(gw))
            if request.headers.get("x-opencode-directory") or request.args.get("directory")
            else None
        )
        roots = request.args.get("roots") == "true"
        search = (request.args.get("search") or "").lower()
        start = _int("start", None)
        limit = _int("limit", max_sessions) or max_sessions
        out: list[dict[str, Any]] = []
        for info in await every_session():
            if directory is not None and info.location.directory != directory:
                continue
            if roots and isinstance(info.parent_id, str):
                continue
            if search and search not in info.title.lower():
                continue
            if start is not None and info.time.updated < start:
                continue
            out.append(session_json(info))
            if len(out) >= limit:
                break
        return _json(out)

    @table.post(
        "/session", "session.create", "Create a session", body=SessionCreateBody,
        answer=_OBJECT, query=("directory",), errors=("InvalidRequestError",), empty_ok=True,
    )  # fmt: skip
    async def create_session(body: SessionCreateBody) -> Response:
        directory = request_directory(gw)
        info = await rt.sessions.create(
            location=Location(directory=str(directory)), agent=body.agent,
            model=body.model.ref() if body.model else None, title=body.title,
            parent_id=body.parentID,
        )  # fmt: skip
        await rt.projects.registered(str(directory))
        return _json(session_json(await share_if_auto(gw, info)))

    @table.get(
        "/session/status", "session.status", "Busy sessions", answer=_OBJECT,
        query=("directory",),
    )  # fmt: skip
    async def session_status() -> Response:
        busy = set(rt.sessions.active()) | gw.board.waiting | set(gw.shells)
        grant = current_grant()
        seen = [sid for sid in sorted(busy) if await gw.scope.visible(grant, sid)]
        return _json({sid: {"type": "busy"} for sid in seen})

    @table.get("/session/{sessionID}", "session.get", "A session", answer=_OBJECT)
    async def get_session(session_id: str) -> Response:
        return _json(session_json(await rt.sessions.get(session_id)))

    @table.patch(
        "/session/{sessionID}", "session.update", "Rename a session", body=SessionUpdateBody,
        answer=_OBJECT, errors=("InvalidRequestError",), empty_ok=True,
    )  # fmt: skip
    async def update_session(body: SessionUpdateBody, session_id: str) -> Response:
        if body.title is not None:
            if not body.title.strip():
                raise GatewayError("InvalidRequestError", "title must not be empty")
            return _json(session_json(await rt.sessions.rename(session_id, body.title.strip())))
        return _json(session_json(await rt.sessions.get(session_id)))

    @table.delete(
        "/session/{sessionID}", "session.delete", "Delete a session and its children",
        answer=_BOOL,
    )  # fmt: skip
    async def delete_session(session_id: str) -> Response:
        for info in await rt.sessions.delete(session_id):
            gw.forget(info.id)
        return _json(True)

    async def share(session_id: str) -> Response:
        """OpenCode's share routes in its V1 error shape: ``POST`` shares the session on
        this server (``gateway.http.share_session``; 400 ``BadRequest`` when the
        configuration says ``share: "disabled"``), ``DELETE`` unshares it; each answers
        the ``Session`` (with ``share: {url}`` while shared); an unknown session is 404
        ``NotFoundError``."""
        try:
            if request.method == "DELETE":
                return _json(session_json(await unshare_session(gw, session_id)))
            return _json(session_json(await share_session(gw, session_id)))
        except SessionNotFoundError:
            message = f"Session not found: {session_id}"
            raise GatewayError("NotFoundError", message, named=True) from None
        except GatewayError as exc:
            raise GatewayError(exc.tag, exc.message, named=True) from None

    for method, operation, summary in (
        ("POST", "session.share", "Share the session: a read-only link on this server"),
        ("DELETE", "session.unshare", "Unshare the session"),
    ):
        table.add(
            method, "/session/{sessionID}/share", operation, summary, answer=_OBJECT,
            query=("directory",), errors=("BadRequest", "NotFoundError"), named_errors=True,
        )(share)  # fmt: skip

    @table.get("/session/{sessionID}/children", "session.children", "Child sessions", answer=_LIST)
    async def children(session_id: str) -> Response:
        return _json([session_json(c) for c in await rt.sessions.children(session_id)])

    @table.get(
        "/session/{sessionID}/diff", "session.diff",
        "Files the session's file tools changed (since messageID), as diffs", answer=_LIST,
        query=("messageID",),
    )  # fmt: skip
    async def diff(session_id: str) -> Response:
        message_id = request.args.get("messageID") or None
        return _json(await session_diffs(rt, session_id, message_id=message_id))

    @table.get(
        "/session/{sessionID}/message", "session.messages", "Messages as {info, parts}",
        answer=_LIST, query=("limit",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def messages(session_id: str) -> Response:
        limit = _int("limit", None)
        items = await projections(session_id)
        return _json(items[-limit:] if limit else items)

    @table.get(
        "/session/{sessionID}/message/{messageID}", "session.message", "One message",
        answer=_OBJECT, errors=("MessageNotFoundError",),
    )  # fmt: skip
    async def message(session_id: str, message_id: str) -> Response:
        return _json(message_in(await projections(session_id), session_id, message_id))

    async def admit(session_id: str, body: PromptIn) -> str:
        info = await rt.sessions.get(session_id)

        async def servers() -> McpServers:
            return (await rt.execution.current_location(info.location.directory)).mcp

        prompt = prompt_of(await with_resources(body.parts, servers))
        model = body.model.ref() if body.model is not None else None
        if model is not None and body.variant and model.variant is msgspec.UNSET:
            model = ModelRef(id=model.id, provider_id=model.provider_id, variant=body.variant)
        agent = body.agent if body.agent is not None and body.agent != info.agent else None
        model = model if model is not None and model != info.model else None
        await rt.sessions.check_input(info.location, agent=agent, model=model,
                                      check_location=False)  # fmt: skip
        if agent is not None:
            await rt.sessions.switch_agent(session_id, agent)
        if model is not None:
            await rt.sessions.switch_model(session_id, model)
        receipt = await rt.sessions.prompt(
            session_id, prompt=prompt, id=body.messageID, delivery="queue"
        )
        gw.board.busy(session_id)
        return receipt.id

    @table.post(
        "/session/{sessionID}/message", "session.prompt",
        "Prompt and wait until the session is idle; the reply as {info, parts}",
        body=PromptIn, answer=_OBJECT, errors=("InvalidRequestError",),
    )  # fmt: skip
    async def prompt(body: PromptIn, session_id: str) -> Response:
        """Admit the prompt, wait until idle and for the V1 streams to say so, answer the
        last reply. Cancellation (client gone) leaves the prompt admitted and running."""
        user_id = await admit(session_id, body)
        await rt.sessions.wait_idle(session_id)
        with trio.move_on_after(SETTLE_TIMEOUT):
            await gw.board.settled(session_id)
        items = await projections(session_id, since=user_id)
        replies = replies_to(items, user_id)
        mine = [i for i in items if i["info"]["id"] == user_id]
        return _json((replies or mine or items)[-1])

    @table.post(
        "/session/{sessionID}/prompt_async", "session.prompt_async",
        "Admit a prompt and answer at once", body=PromptIn,
        answer=Answer(status=204, media=None, description="No Content"),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def prompt_async(body: PromptIn, session_id: str) -> Response:
        await admit(session_id, body)
        return Response(b"", status=204)

    @table.post(
        "/session/{sessionID}/abort", "session.abort", "Interrupt the session", answer=_BOOL
    )
    async def abort(session_id: str) -> Response:
        await gw.check_session(session_id)
        shell = gw.shells.get(session_id)
        if shell is not None:
            shell.scope.cancel()
        await rt.sessions.interrupt(session_id)
        return _json(True)

    # -- permissions ----------------------------------------------------------------------

    async def pending() -> list[ev.PermissionInfo]:
        out: list[ev.PermissionInfo] = []
        grant = current_grant()
        for sid in sorted(set(rt.sessions.active()) | gw.board.waiting):
            if await gw.scope.visible(grant, sid):
                out += [p for p in await rt.sessions.permissions(sid) if p.status == "pending"]
        return out

    @table.get(
        "/permission", "permission.list", "Pending permission requests", answer=_LIST,
        query=("directory",),
    )  # fmt: skip
    async def permissions() -> Response:
        return _json([permission_request_json(p) for p in await pending()])

    async def reply_to(request_id: str, reply: Literal["once", "always", "reject"]) -> None:
        for info in await pending():
            if info.id == request_id:
                await rt.sessions.reply_permission(info.session_id, request_id, reply)
                return
        raise GatewayError(
            "PermissionNotFoundError", f"Permission request not found: {request_id}",
            requestID=request_id,
        )  # fmt: skip

    @table.post(
        "/permission/{requestID}/reply", "permission.reply", "Answer a permission request",
        body=PermissionReplyIn, answer=_BOOL,
        errors=("PermissionNotFoundError", "ConflictError", "InvalidRequestError"),
    )  # fmt: skip
    async def permission_reply(body: PermissionReplyIn, request_id: str) -> Response:
        await reply_to(request_id, body.reply)
        return _json(True)

    @table.post(
        "/session/{sessionID}/permissions/{permissionID}", "permission.respond",
        "Answer a permission request (deprecated form)", body=PermissionRespondIn, answer=_BOOL,
        errors=("PermissionNotFoundError", "ConflictError", "InvalidRequestError"),
    )  # fmt: skip
    async def permission_respond(
        body: PermissionRespondIn, session_id: str, permission_id: str
    ) -> Response:
        await gw.check_session(session_id)
        await reply_to(permission_id, body.response)
        return _json(True)


def permission_request_json(info: ev.PermissionInfo) -> dict[str, Any]:
    """OpenCode's V1 ``PermissionRequest`` of a pending request."""
    body: dict[str, Any] = {
        "id": info.id, "sessionID": info.session_id, "permission": info.permission,
        "patterns": list(info.resources),
        "metadata": info.metadata if isinstance(info.metadata, dict) else {},
        "always": list(info.save) if isinstance(info.save, list) else [],
    }  # fmt: skip
    if isinstance(info.message_id, str):
        body["tool"] = {"messageID": info.message_id, "callID": info.call_id}
    return body
