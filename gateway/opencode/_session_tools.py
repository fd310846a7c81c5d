"""The todo, question and skill routes, V2 (``/api/...``) and OpenCode's, in OpenCode's
shapes.

Todos: ``GET /session/{id}/todo`` (an array of ``Todo``) and ``GET /api/session/{id}/todo``
(``{"data": [...]}``). Questions: ``GET /question``, ``POST /question/{id}/reply|reject``
(OpenCode's, answering ``true``) and ``/api/session/{id}/question[/{id}/reply|reject]``.
Skills: ``GET /skill`` and ``GET /api/skill`` (``{location, data}``), read afresh off the
trio thread for the Location named by ``location[directory]`` / ``directory``. Commands:
``GET /command``, ``GET /api/command``, ``POST /session/{id}/command`` (OpenCode's: waits for
the answer) and ``POST /api/session/{id}/command`` (answers the admission receipt at once).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
from quart import Response, request

from gateway.http import (
    JSON,
    NO_CONTENT,
    Answer,
    GatewayError,
    Named,
    QuestionReplyBody,
    RouteTable,
    encode,
)
from gateway.opencode._files import inside
from gateway.opencode._transcript import reply_of
from gateway.opencode._v1 import location_info
from runtime import InputAdmitted, ModelRef
from runtime import events as ev
from runtime.agents import CommandInfo, command_hints

if TYPE_CHECKING:
    from gateway.http import Gateway

__all__ = [
    "CommandBody",
    "command_json",
    "command_v2_json",
    "question_json",
    "session_tool_routes",
]

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


_COMMAND: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "agent": {"type": "string"},
        "model": {"type": "string"},
        "source": {"type": "string", "enum": ["command", "mcp", "skill"]},
        "template": {"type": "string"},
        "subtask": {"type": "boolean"},
        "hints": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "template", "hints"],
}
COMMANDS: Final = Named("Command", _COMMAND, array=True)
_COMMAND_V2: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "template": {"type": "string"},
        "description": {"type": "string"},
        "agent": {"type": "string"},
        "model": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "providerID": {"type": "string"}},
            "required": ["id", "providerID"],
        },
    },
    "required": ["name", "template"],
}
COMMAND_PAGE: Final = Named(
    "CommandV2List",
    {
        "type": "object",
        "properties": {
            "location": {"type": "object"},
            "data": {"type": "array", "items": _COMMAND_V2},
        },
        "required": ["location", "data"],
    },
)


class CommandBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """OpenCode's ``session.command`` body (``model`` is ``provider/model``)."""

    command: str
    arguments: str = ""
    messageID: str | None = None  # noqa: N815 - OpenCode's field name
    agent: str | None = None
    model: str | None = None
    variant: str | None = None
    parts: list[dict[str, Any]] | None = None


class CommandV2Body(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    command: str
    arguments: str = ""
    id: str | None = None
    agent: str | None = None
    model: ModelRef | None = None


def command_json(command: CommandInfo) -> dict[str, Any]:
    """OpenCode's ``Command``."""
    hints = command.hints if command.hints is not None else command_hints(command.template)
    source = "mcp" if command.source == "mcp" else "command"
    body: dict[str, Any] = {"name": command.name, "source": source,
                            "template": command.template, "hints": hints}  # fmt: skip
    for key in ("description", "agent", "model"):
        if getattr(command, key) is not None:
            body[key] = getattr(command, key)
    return body


def command_v2_json(command: CommandInfo) -> dict[str, Any]:
    """OpenCode's ``CommandV2Info`` (``model`` as a ``ModelRef``)."""
    body: dict[str, Any] = {"name": command.name, "template": command.template}
    for key in ("description", "agent"):
        if getattr(command, key) is not None:
            body[key] = getattr(command, key)
    if (model := ModelRef.parse(command.model)) is not None:
        body["model"] = {"id": model.id, "providerID": model.provider_id}
    return body


def _model_ref(text: str | None) -> ModelRef | None:
    if text is None:
        return None
    model = ModelRef.parse(text)
    if model is None:
        raise GatewayError("InvalidRequestError", "model must be provider/model")
    return model


def question_json(asked: ev.QuestionAsked) -> dict[str, Any]:
    """OpenCode's ``QuestionRequest``: ``{id, sessionID, questions, tool}``."""
    data: dict[str, Any] = msgspec.to_builtins(asked)
    return {k: v for k, v in data.items() if k not in ("type", "timestamp")}


def _json(body: Any) -> Response:
    return Response(encode(body), status=200, content_type=JSON)


def session_tool_routes(table: RouteTable, gw: Gateway, *, max_messages: int) -> None:
    """Declare the todo, question, skill and command routes (*max_messages*: messages a
    command's reply is looked for in, at most)."""
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

    async def location_json(directory: str) -> dict[str, Any]:
        return await location_info(gw, Path(directory))

    @table.get(
        "/command", "command.list", "The Location's commands", answer=Answer(type=COMMANDS),
        query=("directory",), errors=("InvalidRequestError",),
    )  # fmt: skip
    async def command_list() -> Response:
        found = await tools.commands.list(directory_arg())
        return _json([command_json(c) for c in found])

    @table.get(
        "/api/command", "v2.command.list", "The Location's commands",
        answer=Answer(type=COMMAND_PAGE), query=("location[directory]",),
        errors=("InvalidRequestError",),
    )  # fmt: skip
    async def command_list_v2() -> Response:
        directory = directory_arg()
        found = await tools.commands.list(directory)
        return _json({"location": await location_json(directory),
                      "data": [command_v2_json(c) for c in found]})  # fmt: skip

    @table.post(
        "/api/session/{sessionID}/command", "v2.session.command",
        "Run a command: its expanded template is admitted as the session's prompt",
        body=CommandV2Body, answer=Answer(type=InputAdmitted, envelope="data"),
        errors=("SessionNotFoundError", "InvalidRequestError", "ConflictError"),
    )  # fmt: skip
    async def run_command_v2(body: CommandV2Body, session_id: str) -> Response:
        receipt = await tools.commands.run(
            session_id, body.command, body.arguments, message_id=body.id, agent=body.agent,
            model=body.model,
        )  # fmt: skip
        return _json({"data": receipt})

    @table.post(
        "/session/{sessionID}/command", "session.command",
        "Run a command and wait for the answer", body=CommandBody,
        answer=Answer(type=dict[str, Any]),
        errors=("SessionNotFoundError", "InvalidRequestError", "ServiceUnavailableError"),
    )  # fmt: skip
    async def run_command(body: CommandBody, session_id: str) -> Response:
        receipt = await tools.commands.run(
            session_id, body.command, body.arguments, message_id=body.messageID,
            agent=body.agent, model=_model_ref(body.model),
        )  # fmt: skip
        await gw.rt.sessions.wait_idle(session_id)
        return _json(await reply_of(gw.rt, session_id, receipt.id, limit=max_messages))

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
        return _json({"location": await location_json(directory), "data": await skills(directory)})

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
    async def reply(body: QuestionReplyBody, request_id: str) -> Response:
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
    async def session_reply(body: QuestionReplyBody, session_id: str, request_id: str) -> Response:
        await tools.reply_question(session_id, request_id, body.answers)
        return Response(b"", status=204)

    @table.post(
        "/api/session/{sessionID}/question/{requestID}/reject", "v2.session.question.reject",
        "Reject a question", answer=NO_CONTENT, errors=_ERRORS,
    )  # fmt: skip
    async def session_reject(session_id: str, request_id: str) -> Response:
        await tools.reject_question(session_id, request_id)
        return Response(b"", status=204)
