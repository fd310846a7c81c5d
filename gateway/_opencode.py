"""Pure projections of runtime records onto OpenCode's (non-V2) API shapes.

``Session``, ``Project``, ``{info, parts}`` messages (``UserMessage``, ``AssistantMessage``,
``Part``), ``Provider``/``Model`` and ``Agent``. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from runtime import ModelRef, SessionInfo, SessionMessage
from runtime import messages as msg
from runtime.agents import AgentInfo
from runtime.events import TokenUsage
from runtime.llm import CatalogModel, CatalogProvider

__all__ = [
    "VERSION",
    "agent_json",
    "message_projections",
    "model_json",
    "project_json",
    "provider_json",
    "session_json",
]

VERSION: Final = "kittiwake-0.1.0"
_STATUS: Final = {"available": "active", "deprecated": "deprecated", "hidden": "alpha"}
_MODALITIES: Final = ("text", "audio", "image", "video", "pdf")


def _defined(value: Any) -> bool:
    return value is not msgspec.UNSET and value is not None


def _tokens(usage: Any) -> dict[str, Any]:
    return {
        "input": usage.input, "output": usage.output, "reasoning": usage.reasoning,
        "cache": {"read": usage.cache.read, "write": usage.cache.write},
    }  # fmt: skip


def session_json(info: SessionInfo) -> dict[str, Any]:
    """OpenCode's ``Session``: the slug is the id, ``directory`` the Location's directory."""
    body: dict[str, Any] = {
        "id": info.id, "slug": info.id, "projectID": info.project_id,
        "directory": info.location.directory, "title": info.title, "version": VERSION,
        "time": {"created": info.time.created, "updated": info.time.updated},
        "cost": info.cost, "tokens": _tokens(info.tokens),
    }  # fmt: skip
    if _defined(info.parent_id):
        body["parentID"] = info.parent_id
    if _defined(info.agent):
        body["agent"] = info.agent
    if _defined(info.model):
        model = info.model
        assert not isinstance(model, msgspec.UnsetType)
        body["model"] = {"id": model.id, "providerID": model.provider_id}
    return body


def project_json(
    project_id: str, worktree: str, *, git: bool, created: int, updated: int
) -> dict[str, Any]:
    """OpenCode's ``Project``: one runtime serves one project rooted at *worktree*."""
    body: dict[str, Any] = {
        "id": project_id, "worktree": worktree, "name": worktree.rstrip("/").rsplit("/", 1)[-1],
        "time": {"created": created, "updated": max(created, updated)}, "sandboxes": [],
    }  # fmt: skip
    if git:
        body["vcs"] = "git"
    return body


def _part_id(message_id: str, index: int) -> str:
    return f"prt_{message_id.removeprefix('msg_')}_{index}"


def _tool_text(content: Sequence[Any]) -> str:
    return "".join(getattr(c, "text", "") for c in content)


def _tool_state(tool: msg.AssistantTool, start: int) -> dict[str, Any]:
    state = tool.state
    ran = tool.time.ran if _defined(tool.time.ran) else start
    end = tool.time.completed if _defined(tool.time.completed) else ran
    if isinstance(state, msg.ToolPending):
        return {"status": "pending", "input": {}, "raw": state.input}
    if isinstance(state, msg.ToolRunning):
        return {"status": "running", "input": state.input, "time": {"start": ran}}
    if isinstance(state, msg.ToolCompleted):
        return {
            "status": "completed", "input": state.input, "output": _tool_text(state.content),
            "title": tool.name, "metadata": state.structured,
            "time": {"start": ran, "end": end},
        }  # fmt: skip
    return {
        "status": "error", "input": state.input, "error": state.error.message,
        "metadata": state.structured, "time": {"start": ran, "end": end},
    }  # fmt: skip


def _user(m: msg.UserMessage, info: SessionInfo, fallback_model: Any) -> dict[str, Any]:
    model = info.model if isinstance(info.model, ModelRef) else fallback_model
    header = {
        "id": m.id, "sessionID": info.id, "role": "user", "time": {"created": m.time.created},
        "agent": info.agent if _defined(info.agent) else "build",
        "model": {"providerID": model.provider_id, "modelID": model.id},
    }  # fmt: skip
    base = {"sessionID": info.id, "messageID": m.id}
    parts: list[dict[str, Any]] = [
        {"id": _part_id(m.id, 0), **base, "type": "text", "text": m.text}
    ]
    for n, file in enumerate(m.files, start=1):
        part = {"id": _part_id(m.id, n), **base, "type": "file", "mime": file.mime, "url": file.uri}
        if isinstance(file.name, str):
            part["filename"] = file.name
        parts.append(part)
    return {"info": header, "parts": parts}


def _checkpoint(m: msg.CompactionMessage, info: SessionInfo, fallback_model: Any) -> dict[str, Any]:
    """A compaction checkpoint as OpenCode shows one: a user message with a ``compaction``
    part (``CompactionPart``)."""
    model = info.model if isinstance(info.model, ModelRef) else fallback_model
    header = {
        "id": m.id, "sessionID": info.id, "role": "user", "time": {"created": m.time.created},
        "agent": info.agent if _defined(info.agent) else "build",
        "model": {"providerID": model.provider_id, "modelID": model.id},
    }  # fmt: skip
    part = {
        "id": _part_id(m.id, 0), "sessionID": info.id, "messageID": m.id, "type": "compaction",
        "auto": m.reason == "auto",
    }  # fmt: skip
    return {"info": header, "parts": [part]}


def _assistant(m: msg.AssistantMessage, info: SessionInfo, parent: str) -> dict[str, Any]:
    created = m.time.created
    header: dict[str, Any] = {
        "id": m.id, "sessionID": info.id, "role": "assistant", "time": {"created": created},
        "parentID": parent, "modelID": m.model.id, "providerID": m.model.provider_id,
        "mode": m.agent, "agent": m.agent,
        "path": {"cwd": info.location.directory, "root": info.location.directory},
        "cost": m.cost if _defined(m.cost) else 0.0,
        "tokens": _tokens(m.tokens if _defined(m.tokens) else TokenUsage()),
    }  # fmt: skip
    if _defined(m.time.completed):
        header["time"]["completed"] = m.time.completed
    if _defined(m.finish):
        header["finish"] = m.finish
    if _defined(m.error):
        error = m.error
        assert not isinstance(error, msgspec.UnsetType)
        header["error"] = {"name": "UnknownError", "data": {"message": error.message}}
    base = {"sessionID": info.id, "messageID": m.id}
    parts: list[dict[str, Any]] = []
    for n, item in enumerate(m.content):
        pid = _part_id(m.id, n)
        if isinstance(item, msg.AssistantText):
            parts.append({"id": pid, **base, "type": "text", "text": item.text})
        elif isinstance(item, msg.AssistantReasoning):
            parts.append(
                {"id": pid, **base, "type": "reasoning", "text": item.text,
                 "time": {"start": created}}
            )  # fmt: skip
        elif isinstance(item, msg.AssistantTool):
            parts.append(
                {"id": pid, **base, "type": "tool", "callID": item.id, "tool": item.name,
                 "state": _tool_state(item, created)}
            )  # fmt: skip
    return {"info": header, "parts": parts}


def message_projections(
    messages: Iterable[SessionMessage], info: SessionInfo, fallback_model: Any
) -> list[dict[str, Any]]:
    """``{info, parts}`` for each user and assistant message, chronological.

    Synthetic, system and switch messages have no OpenCode ``Message`` shape and are left out;
    a compaction checkpoint is a user message with a ``compaction`` part. An assistant
    message's ``parentID`` is the user message before it.
    """
    out: list[dict[str, Any]] = []
    parent = ""
    for m in messages:
        if isinstance(m, msg.UserMessage):
            parent = m.id
            out.append(_user(m, info, fallback_model))
        elif isinstance(m, msg.AssistantMessage):
            out.append(_assistant(m, info, parent or m.id))
        elif isinstance(m, msg.CompactionMessage):
            out.append(_checkpoint(m, info, fallback_model))
    return out


def model_json(model: CatalogModel) -> dict[str, Any]:
    """OpenCode's ``Model`` from a catalog model."""
    cost = model.cost
    body: dict[str, Any] = {
        "id": model.id, "providerID": model.provider_id, "name": model.name,
        "api": {"id": model.wire_id or model.id, "url": model.api or "", "npm": model.npm},
        "capabilities": {
            "temperature": model.temperature, "reasoning": model.reasoning,
            "attachment": model.attachment, "toolcall": model.tool_call,
            "input": {k: k in model.input_modalities for k in _MODALITIES},
            "output": {k: k in model.output_modalities for k in _MODALITIES},
            "interleaved": (
                {"field": model.interleaved_field} if model.interleaved_field else False
            ),
        },
        "cost": {
            "input": cost.input if cost else 0.0, "output": cost.output if cost else 0.0,
            "cache": {
                "read": (cost.cache_read or 0.0) if cost else 0.0,
                "write": (cost.cache_write or 0.0) if cost else 0.0,
            },
        },
        "limit": {"context": model.limit.context, "output": model.limit.output},
        "status": _STATUS.get(model.status, "active"),
        "options": model.request_options, "headers": model.compat_headers,
        "release_date": model.release_date or "",
    }  # fmt: skip
    if model.limit.input is not None:
        body["limit"]["input"] = model.limit.input
    return body


def provider_json(
    provider: CatalogProvider, *, connected: bool, source: str | None = None
) -> dict[str, Any]:
    """OpenCode's ``Provider``: ``source`` says where its credential comes from (default:
    ``env`` when connected, else ``api``)."""
    return {
        "id": provider.id, "name": provider.name,
        "source": source or ("env" if connected else "api"),
        "env": list(provider.env), "options": provider.options,
        "models": {mid: model_json(m) for mid, m in provider.models.items()},
    }  # fmt: skip


def agent_json(agent: AgentInfo) -> dict[str, Any]:
    """OpenCode's ``Agent``; ``native`` marks the built-ins."""
    body: dict[str, Any] = {
        "name": agent.name, "mode": agent.mode, "native": agent.builtin,
        "permission": [
            {"permission": r.permission, "pattern": r.pattern, "action": r.action}
            for r in agent.permission
        ],
        "options": {},
    }  # fmt: skip
    if agent.description is not None:
        body["description"] = agent.description
    if agent.prompt is not None:
        body["prompt"] = agent.prompt
    if agent.steps is not None:
        body["steps"] = agent.steps
    if agent.model and "/" in agent.model:
        provider_id, _, model_id = agent.model.partition("/")
        body["model"] = {"providerID": provider_id, "modelID": model_id}
    return body
