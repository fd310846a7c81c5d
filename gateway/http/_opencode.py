"""Pure projections of runtime records onto OpenCode's (non-V2) API shapes.

``Session``, ``Project``, ``{info, parts}`` messages (``UserMessage``, ``AssistantMessage``,
``Part``), ``Provider``/``Model`` and ``Agent``. Nothing here does I/O.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

from runtime import ModelRef, SessionInfo, SessionMessage
from runtime import messages as msg
from runtime.agents import AgentInfo
from runtime.events import TokenUsage
from runtime.llm import CatalogModel, CatalogProvider
from runtime.tools import patch_counts

if TYPE_CHECKING:
    from actors import ProjectInfo

__all__ = [
    "ABORTED",
    "VERSION",
    "agent_json",
    "agent_v2_json",
    "assistant_json",
    "content_json",
    "message_error",
    "message_projections",
    "model_json",
    "model_v2_json",
    "part_id",
    "project_json",
    "provider_json",
    "provider_v2_json",
    "session_json",
    "step_finish_json",
    "tokens_json",
    "tool_input_json",
    "tool_metadata_json",
    "tool_name_json",
    "tool_state_json",
    "turn_agent_model",
    "user_json",
]

VERSION: Final = "kittiwake-0.1.0"
_STATUS: Final = {"available": "active", "deprecated": "deprecated", "hidden": "alpha"}
_MODALITIES: Final = ("text", "audio", "image", "video", "pdf")
ABORTED: Final = "interrupted"
"""The finish of a step an interrupt cut short: OpenCode's ``MessageAbortedError``."""


def _defined(value: Any) -> bool:
    return value is not msgspec.UNSET and value is not None


def tokens_json(usage: Any) -> dict[str, Any]:
    """OpenCode's token counts of a ``TokenUsage``."""
    return {
        "input": usage.input, "output": usage.output, "reasoning": usage.reasoning,
        "cache": {"read": usage.cache.read, "write": usage.cache.write},
    }  # fmt: skip


def turn_agent_model(info: SessionInfo, default_model: ModelRef) -> tuple[str, ModelRef]:
    """The agent and model the session's next step runs with, as far as its info tells
    (before the step's durable start says): its own, else *default_model* and ``build``."""
    model = info.model if isinstance(info.model, ModelRef) else default_model
    return (info.agent if isinstance(info.agent, str) else "build"), model


def session_json(info: SessionInfo) -> dict[str, Any]:
    """OpenCode's ``Session``: the slug is the id, ``directory`` the Location's directory."""
    body: dict[str, Any] = {
        "id": info.id, "slug": info.id, "projectID": info.project_id,
        "directory": info.location.directory, "title": info.title, "version": VERSION,
        "time": {"created": info.time.created, "updated": info.time.updated},
        "cost": info.cost, "tokens": tokens_json(info.tokens),
    }  # fmt: skip
    if _defined(info.parent_id):
        body["parentID"] = info.parent_id
    if _defined(info.agent):
        body["agent"] = info.agent
    if _defined(info.model):
        model = info.model
        assert not isinstance(model, msgspec.UnsetType)
        body["model"] = {"id": model.id, "providerID": model.provider_id}
    if _defined(info.revert):
        body["revert"] = msgspec.to_builtins(info.revert)
    if not isinstance(info.share, msgspec.UnsetType):
        body["share"] = {"url": info.share.url}
    return body


def project_json(info: ProjectInfo) -> dict[str, Any]:
    """OpenCode's ``Project`` of a registered project."""
    time: dict[str, int] = {"created": info.time_created, "updated": info.time_updated}
    if info.time_initialized is not None:
        time["initialized"] = info.time_initialized
    body: dict[str, Any] = {
        "id": info.id, "worktree": info.worktree,
        "name": info.worktree.rstrip("/").rsplit("/", 1)[-1], "time": time,
        "sandboxes": list(info.sandboxes),
    }  # fmt: skip
    if info.vcs is not None:
        body["vcs"] = info.vcs
    return body


def part_id(message_id: str, index: int) -> str:
    """The id of a message's *index*-th part: zero-padded, so ids sort in creation order
    (an assistant message's step-start is part 0, its content from 1, its step-finish last)."""
    return f"prt_{message_id.removeprefix('msg_')}_{index:04d}"


def _tool_text(content: Sequence[Any]) -> str:
    return "".join(getattr(c, "text", "") for c in content)


_ALIASES: Final = {
    "path": "filePath", "old_string": "oldString", "new_string": "newString",
    "replace_all": "replaceAll", "patch_text": "patchText", "num_results": "numResults",
}  # fmt: skip
"""The inputs' names before the tools took OpenCode's: calls stored then keep them."""
_RENAMED: Final = frozenset({"read", "write", "edit", "apply_patch", "websearch"})
_TOOL_NAMES: Final = {"shell": "bash"}


def tool_name_json(tool: str) -> str:
    """A tool's name as OpenCode's clients know it (Kittiwake's ``shell`` is ``bash``)."""
    return _TOOL_NAMES.get(tool, tool)


def tool_input_json(tool: str, value: Any) -> dict[str, Any]:
    """A tool call's input as OpenCode's clients read it. The tools take OpenCode's names;
    a call stored before they did has its old names (``path``, ``old_string``, ...) shown
    as OpenCode's (``filePath``, ``oldString``, ...), which its UI draws from."""
    if not isinstance(value, dict):
        return {}
    if tool not in _RENAMED:
        return value
    return {_ALIASES.get(str(k), str(k)): v for k, v in value.items()}


def tool_metadata_json(
    tool: str, given: dict[str, Any], structured: dict[str, Any], output: str, directory: str
) -> dict[str, Any]:
    """A completed call's ``metadata`` as OpenCode's UI reads it: the tool's structured
    result with OpenCode's keys added. ``bash``: ``output`` (the text) and ``description``;
    ``write``: ``filepath`` (absolute), ``exists`` (before the call) and ``diagnostics``;
    ``edit``: ``filepath``, ``diff``, ``filediff`` ``{file, patch, additions, deletions}``
    and ``diagnostics``. ``diagnostics`` maps a path to its LSP errors, under the input's
    ``filePath`` too (where the UI looks)."""
    metadata = dict(structured)
    if tool in _TOOL_NAMES:
        metadata.setdefault("output", output)  # OpenCode's UI shows a shell's here
        if isinstance(given.get("description"), str):
            metadata.setdefault("description", given["description"])
    if tool not in ("write", "edit") or not isinstance(structured.get("path"), str):
        return metadata
    path = structured["path"]
    filepath = os.path.join(directory, path)
    metadata["filepath"] = filepath
    found = structured.get("diagnostics")
    diagnostics = dict(found) if isinstance(found, dict) else {}
    named = given.get("filePath")
    if isinstance(named, str) and named != path and path in diagnostics:
        diagnostics[named] = diagnostics[path]
    metadata["diagnostics"] = diagnostics
    if tool == "write" and isinstance(structured.get("created"), bool):
        metadata["exists"] = not structured["created"]
    diff = structured.get("diff")
    if tool == "edit" and isinstance(diff, str):
        additions, deletions = patch_counts(diff)
        metadata["filediff"] = {
            "file": filepath, "patch": diff, "additions": additions, "deletions": deletions,
        }  # fmt: skip
    return metadata


def tool_state_json(tool: msg.AssistantTool, start: int, directory: str) -> dict[str, Any]:
    """OpenCode's ``ToolState`` of a projected tool call (*start*: the time it ran, if
    unknown; *directory*: the session's, which the file tools' paths are relative to)."""
    state = tool.state
    ran = tool.time.ran if _defined(tool.time.ran) else start
    end = tool.time.completed if _defined(tool.time.completed) else ran
    if isinstance(state, msg.ToolPending):
        return {"status": "pending", "input": {}, "raw": state.input}
    given = tool_input_json(tool.name, state.input)
    if isinstance(state, msg.ToolRunning):
        return {"status": "running", "input": given, "time": {"start": ran}}
    if isinstance(state, msg.ToolCompleted):
        output = _tool_text(state.content)
        metadata = tool_metadata_json(tool.name, given, state.structured, output, directory)
        return {
            "status": "completed", "input": given, "output": output,
            "title": tool.name, "metadata": metadata,
            "time": {"start": ran, "end": end},
        }  # fmt: skip
    return {
        "status": "error", "input": given, "error": state.error.message,
        "metadata": state.structured, "time": {"start": ran, "end": end},
    }  # fmt: skip


def user_json(m: msg.UserMessage, info: SessionInfo, fallback_model: Any) -> dict[str, Any]:
    """``{info, parts}`` of a user message: its text part, then a part per file."""
    model = info.model if isinstance(info.model, ModelRef) else fallback_model
    header = {
        "id": m.id, "sessionID": info.id, "role": "user", "time": {"created": m.time.created},
        "agent": info.agent if _defined(info.agent) else "build",
        "model": {"providerID": model.provider_id, "modelID": model.id},
    }  # fmt: skip
    base = {"sessionID": info.id, "messageID": m.id}
    parts: list[dict[str, Any]] = [{"id": part_id(m.id, 0), **base, "type": "text", "text": m.text}]
    for n, file in enumerate(m.files, start=1):
        part = {"id": part_id(m.id, n), **base, "type": "file", "mime": file.mime, "url": file.uri}
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
        "id": part_id(m.id, 0), "sessionID": info.id, "messageID": m.id, "type": "compaction",
        "auto": m.reason == "auto",
    }  # fmt: skip
    return {"info": header, "parts": [part]}


def message_error(finish: Any, error: Any) -> dict[str, Any] | None:
    """The ``error`` of an assistant message: aborted when an interrupt ended its step."""
    if _defined(error):
        return {"name": "UnknownError", "data": {"message": error.message}}
    if finish == ABORTED:
        return {"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}}
    return None


def step_finish_json(
    message_id: str, session_id: str, index: int, finish: str, cost: float, tokens: Any
) -> dict[str, Any]:
    """The step-finish part closing an assistant message."""
    return {
        "id": part_id(message_id, index), "sessionID": session_id, "messageID": message_id,
        "type": "step-finish", "reason": finish, "cost": cost, "tokens": tokens_json(tokens),
    }  # fmt: skip


def content_json(
    item: msg.AssistantContent, base: dict[str, Any], index: int, created: int, ended: int | None,
    directory: str,
) -> dict[str, Any]:  # fmt: skip
    """One content item of an assistant message as an OpenCode ``Part`` (*directory*: the
    session's)."""
    pid = part_id(base["messageID"], index)
    times = {"start": created} if ended is None else {"start": created, "end": ended}
    if isinstance(item, msg.AssistantText):
        return {"id": pid, **base, "type": "text", "text": item.text, "time": times}
    if isinstance(item, msg.AssistantReasoning):
        return {"id": pid, **base, "type": "reasoning", "text": item.text, "time": times}
    return {
        "id": pid, **base, "type": "tool", "callID": item.id, "tool": tool_name_json(item.name),
        "state": tool_state_json(item, created, directory),
    }  # fmt: skip


def assistant_json(m: msg.AssistantMessage, info: SessionInfo, parent: str) -> dict[str, Any]:
    """``{info, parts}`` of an assistant message (one step): step-start, its content in
    order, and step-finish once the step ended."""
    created = m.time.created
    header: dict[str, Any] = {
        "id": m.id, "sessionID": info.id, "role": "assistant", "time": {"created": created},
        "parentID": parent, "modelID": m.model.id, "providerID": m.model.provider_id,
        "mode": m.agent, "agent": m.agent,
        "path": {"cwd": info.location.directory, "root": info.location.directory},
        "cost": m.cost if _defined(m.cost) else 0.0,
        "tokens": tokens_json(m.tokens if _defined(m.tokens) else TokenUsage()),
    }  # fmt: skip
    completed = m.time.completed if isinstance(m.time.completed, int) else None
    if completed is not None:
        header["time"]["completed"] = completed
    if _defined(m.finish):
        header["finish"] = m.finish
    error = message_error(m.finish, m.error)
    if error is not None:
        header["error"] = error
    base = {"sessionID": info.id, "messageID": m.id}
    parts: list[dict[str, Any]] = [{"id": part_id(m.id, 0), **base, "type": "step-start"}]
    for n, item in enumerate(m.content, start=1):
        parts.append(content_json(item, base, n, created, completed, info.location.directory))
    if _defined(m.finish):
        finish = m.finish if isinstance(m.finish, str) else "stop"
        tokens = m.tokens if _defined(m.tokens) else TokenUsage()
        cost = m.cost if isinstance(m.cost, float) else 0.0
        parts.append(step_finish_json(m.id, info.id, len(parts), finish, cost, tokens))
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
            out.append(user_json(m, info, fallback_model))
        elif isinstance(m, msg.AssistantMessage):
            out.append(assistant_json(m, info, parent or m.id))
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
    if (model := ModelRef.parse(agent.model)) is not None:
        body["model"] = {"providerID": model.provider_id, "modelID": model.id}
    return body


# -- the V2 catalog (``/api/agent|model|provider``) -----------------------------------------


def _release_ms(date: str | None) -> int:
    """A ``YYYY-MM-DD`` release date as ms since the epoch; 0 when unknown."""
    if not date:
        return 0
    try:
        return int(datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        return 0


def model_v2_json(model: CatalogModel, *, enabled: bool) -> dict[str, Any]:
    """OpenCode's ``ModelV2Info``; *enabled*: its provider has a credential."""
    cost = model.cost
    body: dict[str, Any] = {
        "id": model.id, "providerID": model.provider_id, "name": model.name,
        "api": {"id": model.wire_id or model.id, "type": "aisdk", "package": model.npm},
        "capabilities": {
            "tools": model.tool_call, "input": list(model.input_modalities),
            "output": list(model.output_modalities),
        },
        "request": {"headers": dict(model.compat_headers), "body": dict(model.request_options)},
        "variants": [
            {"id": name, "headers": {}, "body": dict(variant.request_options)}
            for name, variant in sorted(model.variants.items())
        ],
        "time": {"released": _release_ms(model.release_date)},
        "cost": [] if cost is None else [{
            "input": cost.input, "output": cost.output,
            "cache": {"read": cost.cache_read or 0.0, "write": cost.cache_write or 0.0},
        }],
        "status": _STATUS.get(model.status, "active"), "enabled": enabled,
        "limit": {"context": model.limit.context, "output": model.limit.output},
    }  # fmt: skip
    if model.api:
        body["api"]["url"] = model.api
    if model.limit.input is not None:
        body["limit"]["input"] = model.limit.input
    return body


def provider_v2_json(provider: CatalogProvider, *, connected: bool) -> dict[str, Any]:
    """OpenCode's ``ProviderV2Info``: ``disabled`` when it has no credential."""
    api: dict[str, Any] = {"type": "aisdk", "package": provider.npm}
    if provider.api:
        api["url"] = provider.api
    return {
        "id": provider.id, "name": provider.name, "disabled": not connected, "api": api,
        "request": {"headers": {}, "body": {}},
    }  # fmt: skip


def agent_v2_json(agent: AgentInfo) -> dict[str, Any]:
    """OpenCode's ``AgentV2Info``: permission rules as ``{action, resource, effect}``."""
    body: dict[str, Any] = {
        "id": agent.name, "mode": agent.mode, "hidden": False,
        "request": {"headers": {}, "body": {}},
        "permissions": [
            {"action": r.permission, "resource": r.pattern, "effect": r.action}
            for r in agent.permission
        ],
    }  # fmt: skip
    if agent.description is not None:
        body["description"] = agent.description
    if agent.prompt is not None:
        body["system"] = agent.prompt
    if agent.steps is not None:
        body["steps"] = agent.steps
    if (model := ModelRef.parse(agent.model)) is not None:
        body["model"] = {"id": model.id, "providerID": model.provider_id}
    return body
