"""The todo, question and skill routes, V2 (``/api/...``) and OpenCode's, in OpenCode's
shapes.

Todos: ``GET /session/{id}/todo`` (an array of ``Todo``) and ``GET /api/session/{id}/todo``
(``{"data": [...]}``). Questions: ``GET /question``, ``POST /question/{id}/reply|reject``
(OpenCode's, answering ``true``) and ``/api/session/{id}/question[/{id}/reply|reject]``.
Skills: ``GET /skill`` and ``GET /api/skill`` (``{location, data}``), read afresh off the
trio thread for the Location named by ``location[directory]`` / ``directory``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec
from quart import Response, request

from gateway._files import inside
from gateway._routes import JSON, NO_CONTENT, Answer, Named, RouteTable
from gateway._wire import GatewayError, decode_body, encode
from runtime import events as ev

if TYPE_CHECKING:
    from gateway._app import Gateway

__all__ = ["QuestionReplyBody", "question_json", "session_tool_routes"]

_TODO_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "content": {"type": "string"},
        "status": {"type": "string"},
        "priority": {"type": "string"},
    },
    "required": ["content", "status", "priority"],
}
TODOS: Final = Named("Todo", _TODO_SCHEMA, array=True)
_OPTION: Final = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "description": {"type": "string"}},
    "required": ["label", "description"],
}
_QUESTION_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "sessionID": {"type": "string"},
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "header": {"type": "string"},
                    "options": {"type": "array", "items": _OPTION},
                    "multiple": {"type": "boolean"},
                    "custom": {"type": "boolean"},
                },
                "required": ["question", "header", "options"],
            },
        },
        "tool": {
            "type": "object",
            "properties": {"messageID": {"type": "string"}, "callID": {"type": "string"}},
            "required": ["messageID", "callID"],
        },
    },
    "required": ["id", "sessionID", "questions"],
}
QUESTIONS: Final = Named("QuestionRequest", _QUESTION_SCHEMA, array=True)
_ERRORS: Final = ("QuestionNotFoundError", "InvalidRequestError")
_SKILL: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "location": {"type": "string"},
        "content": {"type": "string"},
    },
    "required": ["name", "location", "content"],
}
SKILLS: Final = Named("SkillInfo", _SKILL, array=True)
SKILL_PAGE: Final = Named(
    "SkillV2List",
    {
        "type": "object",
        "properties": {
            "location": {
                "type": "object",
                "properties": {
                    "directory": {"type": "string"},
                    "project": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "directory": {"type": "string"}},
                        "required": ["id", "directory"],
                    },
                },
                "required": ["directory", "project"],
            },
            "data": {"type": "array", "items": _SKILL},
        },
        "required": ["location", "data"],
    },
)


class QuestionReplyBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The user's answers in order of the questions, each a list of chosen labels."""

    answers: list[list[str]]


def question_json(asked: ev.QuestionAsked) -> dict[str, Any]:
    """OpenCode's ``QuestionRequest``: ``{id, sessionID, questions, tool}``."""
    data: dict[str, Any] = msgspec.to_builtins(asked)
    return {k: v for k, v in data.items() if k not in ("type", "timestamp")}


def _json(body: Any) -> Response:
    return Response(encode(body), status=200, content_type=JSON)


async def _body() -> bytes:
    data = await request.get_data(as_text=False)
    return data if isinstance(data, bytes) else data.encode()


def session_tool_routes(table: RouteTable, gw: Gateway) -> None:
    """Declare the todo, question and skill routes."""
    tools = gw.rt.tools

    def directory_arg() -> str:
        root = gw.directory.resolve()
        raw = request.args.get("location[directory]") or request.args.get("directory")
        if raw is None:
            return str(root)
        directory = inside(root, raw)
        if not directory.is_dir():
            raise GatewayError("InvalidRequestError", f"Not a directory: {raw}")
        return str(directory)

    async def skills(directory: str) -> list[dict[str, Any]]:
        execution = gw.rt.execution
        found = await execution.rescan_skills(await execution.location(directory))
        return [msgspec.to_builtins(found[name]) for name in sorted(found)]

    @table.get(
        "/skill", "app.skills", "The Location's skills", answer=Answer(type=SKILLS),
        query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def skill_list() -> Response:
        return _json(await skills(directory_arg()))

    @table.get(
        "/api/skill", "v2.skill.list", "The Location's skills", answer=Answer(type=SKILL_PAGE),
        query=("location[directory]",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def skill_list_v2() -> Response:
        directory = directory_arg()
        project = {"id": str(gw.rt.sessions.project_id), "directory": str(gw.directory.resolve())}
        location = {"directory": directory, "project": project}
        return _json({"location": location, "data": await skills(directory)})

    @table.get(
        "/session/{sessionID}/todo", "session.todo", "The session's todo list",
        answer=Answer(type=TODOS), errors=("SessionNotFoundError",),
    )  # fmt: skip
    async def todo(session_id: str) -> Response:
        return _json(await tools.todos(session_id))

    @table.get(
        "/api/session/{sessionID}/todo", "v2.session.todo", "The session's todo list",
        answer=Answer(type=TODOS, envelope="data"), errors=("SessionNotFoundError",),
    )  # fmt: skip
    async def todo_v2(session_id: str) -> Response:
        return _json({"data": await tools.todos(session_id)})

    @table.get("/question", "question.list", "Pending questions", answer=Answer(type=QUESTIONS))
    async def questions() -> Response:
        return _json([question_json(q) for q in await tools.pending_questions()])

    @table.post(
        "/question/{requestID}/reply", "question.reply", "Answer a question",
        body=QuestionReplyBody, answer=Answer(type=bool), errors=_ERRORS,
    )  # fmt: skip
    async def reply(request_id: str) -> Response:
        body = decode_body(await _body(), QuestionReplyBody)
        await tools.reply_question(None, request_id, body.answers)
        return _json(True)

    @table.post(
        "/question/{requestID}/reject", "question.reject", "Reject a question",
        answer=Answer(type=bool), errors=_ERRORS,
    )  # fmt: skip
    async def reject(request_id: str) -> Response:
        await tools.reject_question(None, request_id)
        return _json(True)

    @table.get(
        "/api/session/{sessionID}/question", "v2.session.question.list",
        "The session's pending questions", answer=Answer(type=QUESTIONS, envelope="data"),
        errors=("SessionNotFoundError",),
    )  # fmt: skip
    async def session_questions(session_id: str) -> Response:
        pending = await tools.pending_questions(session_id)
        return _json({"data": [question_json(q) for q in pending]})

    @table.post(
        "/api/session/{sessionID}/question/{requestID}/reply", "v2.session.question.reply",
        "Answer a question", body=QuestionReplyBody, answer=NO_CONTENT, errors=_ERRORS,
    )  # fmt: skip
    async def session_reply(session_id: str, request_id: str) -> Response:
        body = decode_body(await _body(), QuestionReplyBody)
        await tools.reply_question(session_id, request_id, body.answers)
        return Response(b"", status=204)

    @table.post(
        "/api/session/{sessionID}/question/{requestID}/reject", "v2.session.question.reject",
        "Reject a question", answer=NO_CONTENT, errors=_ERRORS,
    )  # fmt: skip
    async def session_reject(session_id: str, request_id: str) -> Response:
        await tools.reject_question(session_id, request_id)
        return Response(b"", status=204)
