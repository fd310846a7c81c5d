"""``GET /doc``: an OpenAPI 3.1 document generated from the msgspec schemas the routes use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from gateway._project import (
    InitBody,
    LogBody,
    MessageBody,
    PermissionResponseBody,
    ProjectSessionBody,
)
from gateway._wire import (
    AgentBody,
    CreateBody,
    ModelBody,
    PermissionCreateBody,
    PermissionReplyBody,
    PromptBody,
)
from runtime import DurableEvent, InputAdmitted, SessionInfo, SessionMessage

__all__ = ["openapi_document"]

_REF: Final = "#/components/schemas/{name}"


class ErrorBody(msgspec.Struct, frozen=True, rename={"tag": "_tag"}):
    """Every error answer: ``{"_tag", "message", ...}``."""

    tag: str
    message: str


_PERMISSION: Final = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "sessionID": {"type": "string"},
        "action": {"type": "string"},
        "resources": {"type": "array", "items": {"type": "string"}},
        "metadata": {"type": "object"},
    },
    "required": ["id", "sessionID", "action", "resources"],
}


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    wrapped = {"type": "object", "properties": {"data": schema}, "required": ["data"]}
    return {"description": "OK", "content": {"application/json": {"schema": wrapped}}}


def _page(item: dict[str, Any]) -> dict[str, Any]:
    cursor = {
        "type": "object",
        "properties": {"previous": {"type": "string"}, "next": {"type": "string"}},
    }
    schema = {
        "type": "object",
        "properties": {"data": {"type": "array", "items": item}, "cursor": cursor},
        "required": ["data", "cursor"],
    }
    return {"description": "OK", "content": {"application/json": {"schema": schema}}}


def _op(
    summary: str,
    responses: dict[str, Any],
    body: dict[str, Any] | None = None,
    params: Sequence[str] = (),
) -> dict[str, Any]:
    error = {"$ref": _REF.format(name="ErrorBody")}
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {
            **responses,
            "default": {"description": "Error", "content": {"application/json": {"schema": error}}},
        },
    }
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in params
        if name.endswith("ID")
    ] + [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
        for name in params
        if not name.endswith("ID")
    ]
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def openapi_document() -> dict[str, Any]:
    """The document: paths of every route with request and response schemas."""
    types = [SessionInfo, InputAdmitted, SessionMessage, DurableEvent, ErrorBody,
             CreateBody, PromptBody, AgentBody, ModelBody, PermissionReplyBody,
             PermissionCreateBody, ProjectSessionBody, MessageBody, PermissionResponseBody,
             LogBody, InitBody]  # fmt: skip
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    paths: dict[str, Any] = _v2_paths(*refs[:5], *refs[5:11])
    paths.update(_project_paths(*refs[11:]))
    components["PermissionV2Request"] = _PERMISSION
    return {
        "openapi": "3.1.0",
        "info": {"title": "Kittiwake", "version": "0.1.0"},
        "paths": paths,
        "components": {"schemas": components},
    }


def _json_ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": "OK", "content": {"application/json": {"schema": schema}}}


def _project_paths(
    session_body: dict[str, Any], message_body: dict[str, Any], permission_body: dict[str, Any],
    log_body: dict[str, Any], init_body: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """OpenCode's project-scoped and directory-resolved routes (``gateway/_project.py``)."""
    obj = _json_ok({"type": "object"})
    arr = _json_ok({"type": "array", "items": {"type": "object"}})
    names = _json_ok({"type": "array", "items": {"type": "string"}})
    yes = _json_ok({"type": "boolean"})
    pid = ["projectID"]
    ps = ["projectID", "sessionID"]
    d = ["directory"]
    unavailable = {"501": {"description": "Not Implemented"}}
    return {
        "/project": {"get": _op("Projects (one per runtime)", {"200": arr}, params=d)},
        "/project/current": {"get": _op("The current project", {"200": obj}, params=d)},
        "/project/{projectID}/session": {
            "get": _op("The project's sessions", {"200": arr}, params=pid),
            "post": _op(
                "Create a session (a child of parentID when given)",
                {"200": obj},
                session_body,
                params=pid,
            ),  # fmt: skip
        },
        "/project/{projectID}/session/{sessionID}": {
            "get": _op("A session", {"200": obj}, params=ps),
            "delete": _op("Delete the session and everything it holds", {"200": yes}, params=ps),
        },
        "/project/{projectID}/session/{sessionID}/children": {
            "get": _op(
                "The sessions created with this one as their parent", {"200": arr}, params=ps
            )  # fmt: skip
        },
        "/project/{projectID}/session/{sessionID}/abort": {
            "post": _op("Interrupt the session", {"200": yes}, params=ps)
        },
        "/project/{projectID}/session/{sessionID}/init": {
            "post": _op(
                "The session writes the project's AGENTS.md; true once answered",
                {"200": yes},
                init_body,
                params=ps,
            )  # fmt: skip
        },
        "/project/{projectID}/session/{sessionID}/compact": {
            "post": _op("Compact (503)", {"503": {"description": "Unavailable"}}, params=ps)
        },
        "/project/{projectID}/session/{sessionID}/share": {
            "post": _op("Share (501)", unavailable, params=ps),
            "delete": _op("Unshare (501)", unavailable, params=ps),
        },
        "/project/{projectID}/session/{sessionID}/revert": {
            "post": _op("Revert (501)", unavailable, params=ps)
        },
        "/project/{projectID}/session/{sessionID}/unrevert": {
            "post": _op("Unrevert (501)", unavailable, params=ps)
        },
        "/project/{projectID}/session/{sessionID}/message": {
            "get": _op("Messages as {info, parts}", {"200": arr}, params=ps),
            "post": _op("Prompt and wait for the answer", {"200": obj}, message_body, params=ps),
        },
        "/project/{projectID}/session/{sessionID}/message/{messageID}": {
            "get": _op("One message as {info, parts}", {"200": obj}, params=[*ps, "messageID"])
        },
        "/project/{projectID}/session/{sessionID}/permission/{permissionID}": {
            "post": _op(
                "Answer a permission request",
                {"200": obj},
                permission_body,
                params=[*ps, "permissionID"],
            )  # fmt: skip
        },
        "/project/{projectID}/agent": {
            "get": _op("Agents of a directory", {"200": arr}, params=[*pid, "directory"])
        },
        "/find/file": {
            "get": _op(
                "Fuzzy file name search",
                {"200": names},
                params=["directory", "query", "type", "dirs", "limit"],
            )  # fmt: skip
        },
        "/project/{projectID}/find/file": {
            "get": _op(
                "Fuzzy file name search",
                {"200": names},
                params=[*pid, "directory", "query", "type", "dirs", "limit"],
            )  # fmt: skip
        },
        "/project/{projectID}/session/{sessionID}/find/file": {
            "get": _op(
                "Fuzzy file name search in the session's directory",
                {"200": names},
                params=[*ps, "query", "type", "dirs", "limit"],
            )  # fmt: skip
        },
        "/project/{projectID}/session/{sessionID}/file": {
            "get": _op("List a directory of the session's", {"200": arr}, params=[*ps, "path"])
        },
        "/project/{projectID}/session/{sessionID}/file/content": {
            "get": _op("A file's content", {"200": obj}, params=[*ps, "path"])
        },
        "/project/{projectID}/session/{sessionID}/file/status": {
            "get": _op("git status of the session's directory", {"200": arr}, params=ps)
        },
        "/file": {"get": _op("List a directory", {"200": arr}, params=["directory", "path"])},
        "/file/content": {
            "get": _op("A file's content", {"200": obj}, params=["directory", "path"])
        },
        "/file/status": {"get": _op("git status", {"200": arr}, params=d)},
        "/provider": {"get": _op("Catalog providers", {"200": obj}, params=d)},
        "/config/providers": {"get": _op("Catalog providers", {"200": obj}, params=d)},
        "/config": {
            "get": _op("The Location's effective configuration", {"200": obj}, params=d),
            "patch": _op(
                "Merge into the Location's configuration file",
                {"200": obj},
                {"type": "object"},
                params=d,
            ),
        },
        "/global/config": {
            "get": _op("The global configuration", {"200": obj}),
            "patch": _op(
                "Merge into the global configuration file", {"200": obj}, {"type": "object"}
            ),
        },
        "/log": {
            "post": _op("Write a client log line", {"204": {"description": "No Content"}}, log_body)
        },
    }


def _v2_paths(
    info: dict[str, Any], admitted: dict[str, Any], message: dict[str, Any],
    _event: dict[str, Any], _error: dict[str, Any], create: dict[str, Any],
    prompt: dict[str, Any], agent: dict[str, Any], model: dict[str, Any], reply: dict[str, Any],
    permission_create: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """OpenCode's V2 routes and the operator routes."""
    permission = {"$ref": _REF.format(name="PermissionV2Request")}
    none = {"204": {"description": "No Content"}}
    sid = ["sessionID"]
    sse = {"description": "SSE", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    paths: dict[str, Any] = {
        "/api/health": {"get": _op("Health", {"200": {"description": "OK"}})},
        "/api/session": {
            "get": _op("List sessions", {"200": _page(info)}, params=["limit", "cursor"]),
            "post": _op("Create a session", {"200": _ok(info)}, create),
        },
        "/api/session/{sessionID}": {"get": _op("Get a session", {"200": _ok(info)}, params=sid)},
        "/api/session/{sessionID}/prompt": {
            "post": _op("Admit a prompt", {"200": _ok(admitted)}, prompt, params=sid)
        },
        "/api/session/{sessionID}/interrupt": {"post": _op("Interrupt", none, params=sid)},
        "/api/session/{sessionID}/wait": {"post": _op("Wait until idle", none, params=sid)},
        "/api/session/{sessionID}/resume": {
            "post": _op("Resume a session a crash cut short (409 if not needed)", none, params=sid)
        },
        "/api/session/{sessionID}/compact": {
            "post": _op("Compact (503)", {"503": {"description": "Unavailable"}}, params=sid)
        },
        "/api/session/{sessionID}/agent": {"post": _op("Switch agent", none, agent, params=sid)},
        "/api/session/{sessionID}/model": {"post": _op("Switch model", none, model, params=sid)},
        "/api/session/{sessionID}/context": {
            "get": _op(
                "Model-visible history",
                {"200": _ok({"type": "array", "items": message})},
                params=sid,
            )  # fmt: skip
        },
        "/api/session/{sessionID}/message": {
            "get": _op(
                "Messages",
                {"200": _page(message)},
                params=["sessionID", "limit", "order", "cursor"],
            )  # fmt: skip
        },
        "/api/session/{sessionID}/message/{messageID}": {
            "get": _op("One message", {"200": _ok(message)}, params=["sessionID", "messageID"])
        },
        "/api/session/{sessionID}/event": {
            "get": _op("Durable events (SSE)", {"200": sse}, params=["sessionID", "after"])
        },
        "/api/session/{sessionID}/history": {
            "get": _op(
                "One page of durable events after a seq",
                {"200": _json_ok({"type": "object"})},
                params=["sessionID", "after", "limit"],
            )  # fmt: skip
        },
        "/api/session/active": {
            "get": _op("Sessions whose drain runs now", {"200": _json_ok({"type": "object"})})
        },
        "/api/session/{sessionID}/permission": {
            "get": _op(
                "Pending permission requests",
                {"200": _ok({"type": "array", "items": permission})},
                params=sid,
            ),
            "post": _op(
                "Evaluate a permission; record a pending request when it needs approval",
                {"200": _json_ok({"type": "object"})},
                permission_create,
                params=sid,
            ),  # fmt: skip
        },
        "/api/session/{sessionID}/permission/{requestID}": {
            "get": _op(
                "One permission request", {"200": _ok(permission)}, params=[*sid, "requestID"]
            )
        },
        "/api/session/{sessionID}/permission/{requestID}/reply": {
            "post": _op("Answer a permission request", none, reply, params=[*sid, "requestID"])
        },
        "/event": {"get": _op("Every session's events and deltas (SSE)", {"200": sse})},
        "/api/actors": {
            "get": _op("Actor tree and storage statistics", {"200": {"description": "OK"}})
        },
    }
    return paths
