"""OpenCode's project-scoped and directory-resolved routes: projects, sessions, messages as
``{info, parts}``, files, providers, config, agents and client logs.

Projects are ``rt.projects``' (a repository, or a directory, registered durably): a request's
project is its directory's (``?directory=``, else the server's). File routes never leave
the server's directory or a registered project's: a path (or ``directory``) resolving
outside it is answered 400. A ``/project/{id}`` route of a project not registered, and a
session of another project under it, are answered 404.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import trio
from quart import Response, request

from gateway.http import (
    NO_CONTENT,
    Answer,
    GatewayError,
    PermissionReplyBody,
    RouteTable,
    agent_json,
    current_grant,
    encode,
    project_filter,
    project_json,
    reply_permission,
    request_directory,
    session_json,
)
from gateway.opencode._config import config_routes
from gateway.opencode._files import file_routes, inside
from gateway.opencode._revert import RevertIn, revert_session
from gateway.opencode._transcript import message_in, reply_of, transcript
from gateway.opencode._v1 import located, registered_project
from runtime import Location, ModelRef, Prompt, SessionInfo, SessionNotFoundError
from runtime.agents import INIT_PROMPT

if TYPE_CHECKING:
    from actors import ProjectInfo
    from gateway.http import Gateway

__all__ = [
    "FileLimits",
    "LogBody",
    "MessageBody",
    "PermissionResponseBody",
    "ProjectBody",
    "ProjectSessionBody",
    "project_routes",
]

_log = logging.getLogger("kittiwake.gateway.project")
_client_log = logging.getLogger("kittiwake.client")
_LEVELS: Final = {
    "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR,
}  # fmt: skip


class FileLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of the file routes.

    Attributes:
        max_walk: directory entries one ``/find/file`` search visits at most.
        max_read: largest file ``/file/content`` returns, in bytes (larger ones are 400).
        max_list: entries ``/file`` returns at most.
        max_messages: messages one ``{info, parts}`` listing reads at most.
        max_sessions: sessions one project session listing returns at most.
        git_timeout: seconds ``git status`` may take before the answer is 503.
        max_projects: projects ``GET /project`` returns at most.
    """

    max_walk: int = 50_000
    max_read: int = 4 * 1024 * 1024
    max_list: int = 5_000
    max_messages: int = 10_000
    max_sessions: int = 10_000
    git_timeout: float = 10.0
    max_projects: int = 1_000


class ProjectSessionBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str | None = None
    parentID: str | None = None
    directory: str | None = None
    title: str | None = None
    agent: str | None = None


class ProjectBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A project to register: its directory (``worktree`` is the same; ``directory`` wins),
    absolute or relative to the server's directory; the request's directory when neither."""

    directory: str | None = None
    worktree: str | None = None


class TextPartInput(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text"):
    text: str
    id: str | None = None
    synthetic: bool | None = None


class ModelInput(msgspec.Struct, frozen=True, kw_only=True):
    providerID: str
    modelID: str


class MessageBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A new user message; only text parts are accepted."""

    parts: list[TextPartInput]
    messageID: str | None = None
    agent: str | None = None
    model: ModelInput | None = None


class InitBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's session init: the model to run it with and the prompt's message id."""

    modelID: str
    providerID: str
    messageID: str


class SummarizeBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's summarize request: the model it names, and whether it was automatic."""

    providerID: str | None = None
    modelID: str | None = None
    auto: bool | None = None


class PermissionResponseBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    response: Literal["once", "always", "reject"]


class LogBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    service: str
    level: Literal["debug", "info", "warn", "error"]
    message: str
    extra: dict[str, Any] | None = None


def _json(body: Any, *, status: int = 200) -> Response:
    return Response(encode(body), status=status, content_type="application/json")


def _not_implemented(what: str) -> GatewayError:
    return GatewayError("NotImplementedError", f"{what} is not implemented", status=501)


def in_project(project: ProjectInfo, raw: str | None) -> Path:
    """The directory *raw* names in *project* (relative to its worktree, or absolute; its
    worktree when None): 400 when it leaves the project's worktree and its other worktrees
    (whether it exists is the session's creation's to check)."""
    root = Path(project.worktree)
    if raw is None:
        return root
    if Path(raw).is_absolute():
        for tree in project.sandboxes:
            with contextlib.suppress(GatewayError):  # not in this one
                return inside(Path(tree), raw)
    return inside(root, raw)


# -- routes -------------------------------------------------------------------------------


def project_routes(table: RouteTable, gw: Gateway, limits: FileLimits) -> None:
    """Declare the project, file, provider, config, agent and log routes to *app*."""
    rt = gw.rt

    def root_arg() -> Path:
        root = gw.directory.resolve()
        raw = request.args.get("directory")
        if raw is None:
            return root
        directory = inside(root, raw)
        if not directory.is_dir():
            raise GatewayError("InvalidRequestError", f"Not a directory: {raw}")
        return directory

    async def file_root() -> Path:
        """The directory a file route names: the server's, one below it, or one of a
        registered project (400 otherwise, as a path leaving it)."""
        home = gw.directory.resolve()
        if request.args.get("directory") is None:
            return home
        directory = request_directory(gw)
        if directory == home or home in directory.parents:
            return directory
        place = await rt.projects.place(str(directory))
        if await rt.projects.get(place.id) is None:
            raw = request.args.get("directory")
            raise GatewayError("InvalidRequestError", f"Path is outside the project: {raw}")
        return directory

    async def check_project(project_id: str) -> ProjectInfo:
        return await registered_project(gw, project_id)

    async def session_of(project_id: str, session_id: str) -> SessionInfo:
        await check_project(project_id)
        info = await rt.sessions.get(session_id)
        if info.project_id != project_id:
            raise SessionNotFoundError(session_id)
        return info

    def named(raw: str | None) -> Path:
        if raw is None:
            return request_directory(gw)
        if "\x00" in raw:
            raise GatewayError("InvalidRequestError", f"Not a directory: {raw!r}")
        directory = (gw.directory / Path(raw).expanduser()).resolve()
        if not directory.is_dir():
            raise GatewayError("InvalidRequestError", f"Not a directory: {raw}")
        return directory

    async def answer_to(session_id: str, text: str, message_id: str | None) -> dict[str, Any]:
        """Admit *text* (queued), wait until the session is idle, return the reply's
        ``{info, parts}``; 503 when the session settled without one."""
        receipt = await rt.sessions.prompt(
            session_id, prompt=Prompt(text=text), id=message_id, delivery="queue"
        )
        await rt.sessions.wait_idle(session_id)
        return await reply_of(rt, session_id, receipt.id, limit=limits.max_messages)

    async def projections(info: SessionInfo) -> list[dict[str, Any]]:
        return await transcript(rt, info.id, limit=limits.max_messages)

    @table.get(
        "/project", "project.list",
        "Registered projects, newest first", answer=Answer(type=list[dict[str, Any]]),
        query=("directory",),
    )  # fmt: skip
    async def projects() -> Response:
        only = project_filter(current_grant())
        found = await rt.projects.list(limit=limits.max_projects)
        return _json([project_json(p) for p in found if only is None or p.id == only])

    @table.post(
        "/project", "project.create",
        "Register the project of a directory (idempotent)", body=ProjectBody,
        answer=Answer(type=dict[str, Any]), errors=("InvalidRequestError", "NotFoundError"),
        empty_ok=True,
    )  # fmt: skip
    async def project_create(body: ProjectBody) -> Response:
        directory = str(named(body.directory or body.worktree))
        await gw.scope.check_directory(current_grant(), directory)
        return _json(project_json(await rt.projects.register(directory)))

    @table.post(
        "/project/init", "project.init",
        "Register the project of a directory and mark it initialized", body=ProjectBody,
        answer=Answer(type=dict[str, Any]), query=("directory",),
        errors=("InvalidRequestError", "NotFoundError"), empty_ok=True,
    )  # fmt: skip
    async def project_initialize(body: ProjectBody) -> Response:
        directory = str(named(body.directory or body.worktree))
        await gw.scope.check_directory(current_grant(), directory)
        return _json(project_json(await rt.projects.initialize(directory)))

    @table.get(
        "/project/current", "project.current",
        "The project of the request's directory (not registered by this read)",
        answer=Answer(type=dict[str, Any]), query=("directory",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def current_project() -> Response:
        return _json(project_json(await rt.projects.current(str(request_directory(gw)))))

    @table.get(
        "/project/{projectID}/session", "project.session.list",
        "The project's sessions", answer=Answer(type=list[dict[str, Any]]),
        errors=("NotFoundError",),
    )  # fmt: skip
    async def project_sessions(project_id: str) -> Response:
        await check_project(project_id)
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await rt.sessions.list(limit=200, cursor=cursor, project_id=project_id)
            out += [session_json(s) for s in page.data if isinstance(s, SessionInfo)]
            cursor = page.next
            if cursor is None or len(out) >= limits.max_sessions:
                return _json(out[: limits.max_sessions])

    @table.post(
        "/project/{projectID}/session", "project.session.create",
        "Create a session (a child of parentID when given)", body=ProjectSessionBody,
        answer=Answer(type=dict[str, Any]), errors=("NotFoundError", "ConflictError"),
        empty_ok=True,
    )  # fmt: skip
    async def project_session_create(body: ProjectSessionBody, project_id: str) -> Response:
        project = await check_project(project_id)
        directory = await trio.to_thread.run_sync(in_project, project, body.directory)
        info = await rt.sessions.create(
            id=body.id, location=Location(directory=str(directory)), agent=body.agent,
            title=body.title, parent_id=body.parentID, project_id=project.id,
        )  # fmt: skip
        return _json(session_json(info))

    @table.get(
        "/project/{projectID}/session/{sessionID}/children", "project.session.children",
        "The sessions created with this one as their parent",
        answer=Answer(type=list[dict[str, Any]]), errors=("NotFoundError",),
    )  # fmt: skip
    async def project_children(project_id: str, session_id: str) -> Response:
        await session_of(project_id, session_id)
        return _json([session_json(child) for child in await rt.sessions.children(session_id)])

    @table.get(
        "/project/{projectID}/session/{sessionID}", "project.session.get",
        "A session", answer=Answer(type=dict[str, Any]), errors=("NotFoundError",),
    )  # fmt: skip
    async def project_session(project_id: str, session_id: str) -> Response:
        return _json(session_json(await session_of(project_id, session_id)))

    @table.delete(
        "/project/{projectID}/session/{sessionID}", "project.session.delete",
        "Delete the session and everything it holds", answer=Answer(type=bool),
        errors=("NotFoundError",),
    )  # fmt: skip
    async def project_delete(project_id: str, session_id: str) -> Response:
        await session_of(project_id, session_id)
        for info in await rt.sessions.delete(session_id):
            gw.forget(info.id)
        return _json(True)

    @table.post(
        "/project/{projectID}/session/{sessionID}/abort", "project.session.abort",
        "Interrupt the session", answer=Answer(type=bool), errors=("NotFoundError",),
    )  # fmt: skip
    async def project_abort(project_id: str, session_id: str) -> Response:
        await session_of(project_id, session_id)
        await rt.sessions.interrupt(session_id)
        return _json(True)

    @table.post(
        "/project/{projectID}/session/{sessionID}/init", "project.session.init",
        "The session writes the project's AGENTS.md; true once answered", body=InitBody,
        answer=Answer(type=bool), errors=("NotFoundError", "ServiceUnavailableError"),
    )  # fmt: skip
    async def project_init(body: InitBody, project_id: str, session_id: str) -> Response:
        """Have the session write the project's AGENTS.md (``INIT_PROMPT``); ``true`` once
        answered. The model is switched to the body's first if it differs.

        Cancellation (client gone) leaves the prompt admitted; the session still runs it.
        """
        info = await session_of(project_id, session_id)
        model = ModelRef(id=body.modelID, provider_id=body.providerID)
        if info.model != model:
            await rt.sessions.switch_model(session_id, model)
        await answer_to(session_id, INIT_PROMPT, body.messageID)
        return _json(True)

    async def summarize(session_id: str) -> Response:
        """Compact the session (at its next safe boundary, now when idle) and answer
        ``true`` once it is idle again. The body's model is checked, not used: the
        ``compaction`` agent's model, else the session's, writes the summary.

        Cancellation (client gone) leaves the compaction asked for; it still runs.
        """
        await rt.sessions.compact(session_id)
        await rt.sessions.wait_idle(session_id)
        return _json(True)

    @table.post(
        "/project/{projectID}/session/{sessionID}/compact", "session.compact",
        "Compact the session; true once done", body=SummarizeBody, answer=Answer(type=bool),
        errors=("NotFoundError", "InvalidRequestError"), empty_ok=True,
    )  # fmt: skip
    async def project_compact(_body: SummarizeBody, project_id: str, session_id: str) -> Response:
        await session_of(project_id, session_id)
        return await summarize(session_id)

    @table.post(
        "/session/{sessionID}/summarize", "session.summarize",
        "Compact the session; true once done", body=SummarizeBody, answer=Answer(type=bool),
        errors=("NotFoundError", "InvalidRequestError"), empty_ok=True,
    )  # fmt: skip
    async def session_summarize(_body: SummarizeBody, session_id: str) -> Response:
        await rt.sessions.get(session_id)
        return await summarize(session_id)

    async def project_share(project_id: str, session_id: str) -> Response:
        raise _not_implemented("Sharing")

    for method, op, summary in (("POST", "share", "Share"), ("DELETE", "unshare", "Unshare")):
        table.add(
            method, "/project/{projectID}/session/{sessionID}/share", f"project.session.{op}",
            f"{summary} (501)",
            errors=("NotImplementedError",),
        )(project_share)  # fmt: skip

    @table.post(
        "/project/{projectID}/session/{sessionID}/revert", "project.session.revert",
        "Roll the session back to a message (as POST /session/{id}/revert)", body=RevertIn,
        answer=Answer(type=dict[str, Any]),
        errors=("NotFoundError", "InvalidRequestError", "MessageNotFoundError", "SessionBusyError"),
    )  # fmt: skip
    async def project_revert(body: RevertIn, project_id: str, session_id: str) -> Response:
        await session_of(project_id, session_id)
        reverted = await revert_session(rt, session_id, body.messageID, body.partID)
        return _json(session_json(reverted.info))

    @table.post(
        "/project/{projectID}/session/{sessionID}/unrevert", "project.session.unrevert",
        "Undo the session's revert", answer=Answer(type=dict[str, Any]),
        errors=("NotFoundError", "SessionBusyError"),
    )  # fmt: skip
    async def project_unrevert(project_id: str, session_id: str) -> Response:
        await session_of(project_id, session_id)
        return _json(session_json(await rt.sessions.reverts.unrevert(session_id)))

    @table.get(
        "/project/{projectID}/session/{sessionID}/message", "project.session.messages",
        "Messages as {info, parts}", answer=Answer(type=list[dict[str, Any]]),
        errors=("NotFoundError",),
    )  # fmt: skip
    async def project_messages(project_id: str, session_id: str) -> Response:
        return _json(await projections(await session_of(project_id, session_id)))

    @table.get(
        "/project/{projectID}/session/{sessionID}/message/{messageID}", "project.session.message",
        "One message as {info, parts}", answer=Answer(type=dict[str, Any]),
        errors=("NotFoundError", "MessageNotFoundError"),
    )  # fmt: skip
    async def project_message(project_id: str, session_id: str, message_id: str) -> Response:
        info = await session_of(project_id, session_id)
        return _json(message_in(await projections(info), session_id, message_id))

    @table.post(
        "/project/{projectID}/session/{sessionID}/message", "project.session.prompt",
        "Prompt and wait for the answer", body=MessageBody, answer=Answer(type=dict[str, Any]),
        errors=("NotFoundError", "ServiceUnavailableError"),
    )  # fmt: skip
    async def project_prompt(body: MessageBody, project_id: str, session_id: str) -> Response:
        """Admit a text prompt, wait until the session is idle, answer the reply.

        Cancellation (client gone) leaves the prompt admitted; the session still answers it.
        """
        info = await session_of(project_id, session_id)
        text = "\n".join(p.text for p in body.parts)
        model = None
        if body.model is not None:
            model = ModelRef(id=body.model.modelID, provider_id=body.model.providerID)
        # both first, so that a bad one switches neither
        await rt.sessions.check_input(
            info.location, agent=body.agent, model=model, check_location=False
        )
        if body.agent is not None:
            await rt.sessions.switch_agent(session_id, body.agent)
        if model is not None:
            await rt.sessions.switch_model(session_id, model)
        return _json(await answer_to(session_id, text, body.messageID))

    @table.post(
        "/project/{projectID}/session/{sessionID}/permission/{permissionID}", "project.permission.respond",
        "Answer a permission request", body=PermissionResponseBody,
        answer=Answer(type=dict[str, Any]),
        errors=("NotFoundError", "PermissionNotFoundError", "ConflictError"),
    )  # fmt: skip
    async def project_permission(
        body: PermissionResponseBody, project_id: str, session_id: str, permission_id: str
    ) -> Response:
        await session_of(project_id, session_id)
        reply = PermissionReplyBody(reply=body.response)
        await reply_permission(rt, session_id, permission_id, reply)
        return _json(session_json(await rt.sessions.get(session_id)))

    @table.get(
        "/project/{projectID}/agent", "project.app.agents",
        "Agents of a directory", answer=Answer(type=list[dict[str, Any]]), query=("directory",),
        errors=("NotFoundError", "InvalidRequestError"),
    )  # fmt: skip
    async def project_agents(project_id: str) -> Response:
        await check_project(project_id)
        root = root_arg()
        agents = (await rt.execution.current_location(str(root))).agents
        return _json([agent_json(a) for _, a in sorted(agents.items())])

    # -- config, providers, log ----------------------------------------------------------

    file_routes(table, gw, limits, file_root, check_project, session_of)
    config_routes(table, rt, root_arg, lambda: located(gw))

    @table.post(
        "/log", "app.log",
        "Write a client log line", body=LogBody, answer=NO_CONTENT,
    )  # fmt: skip
    async def client_log(body: LogBody) -> Response:
        _client_log.log(
            _LEVELS[body.level], body.message,
            extra={"service": body.service, "client_extra": body.extra or {}},
        )  # fmt: skip
        return Response(b"", status=204)
