"""Agents of a Location: the built-ins, ``kittiwake.json`` ``agent`` entries and
``.kittiwake/agent/*.md`` files (front matter plus the prompt as body)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

import msgspec

from runtime.agents._agent import BUILTIN_AGENTS, PLAN_RULES, AgentInfo, compose_rules
from runtime.agents._frontmatter import parse_front_matter
from runtime.agents._permissions import PermissionRule, rules_from_config

__all__ = ["AgentLoad", "agent_from_config", "load_agents"]

AGENT_DIR: Final = os.path.join(".kittiwake", "agent")
_KNOWN: Final = frozenset(
    {"description", "mode", "model", "prompt", "steps", "maxSteps", "tools", "permission"}
)
_log = logging.getLogger("runtime.agents")


class AgentLoad(msgspec.Struct, frozen=True, kw_only=True):
    """Agents by name, plus one diagnostic per file or entry that could not be used."""

    agents: dict[str, AgentInfo]
    diagnostics: list[str] = []


def agent_from_config(
    name: str,
    entry: Mapping[str, Any],
    *,
    configured: Sequence[PermissionRule] = (),
    base: AgentInfo | None = None,
) -> AgentInfo:
    """Build agent *name* from an OpenCode-shaped *entry* layered over *base*.

    Unknown keys are logged, not fatal. Raises ``ValueError`` or
    ``msgspec.ValidationError`` for a malformed value.
    """
    unknown = sorted(set(entry) - _KNOWN)
    if unknown:
        _log.info("unknown agent keys ignored", extra={"agent": name, "keys": unknown})
    own = rules_from_config(entry.get("permission"))
    inherited = list(PLAN_RULES) if base is not None and base.name == "plan" else []
    fields = {
        "name": name,
        "mode": entry.get("mode", base.mode if base else "primary"),
        "description": entry.get("description", base.description if base else None),
        "model": entry.get("model", base.model if base else None),
        "prompt": entry.get("prompt", base.prompt if base else None),
        "steps": entry.get("steps", entry.get("maxSteps", base.steps if base else None)),
        "tools": {**(base.tools if base else {}), **entry.get("tools", {})},
        "permission": msgspec.to_builtins(compose_rules(configured, [*inherited, *own])),
        "builtin": base.builtin if base else False,
    }
    return msgspec.convert(fields, AgentInfo)


def load_agents(
    directory: str,
    *,
    config_agents: Mapping[str, Mapping[str, Any]] | None = None,
    config_permission: Mapping[str, Any] | str | None = None,
    config_tools: Mapping[str, bool] | None = None,
) -> AgentLoad:
    """Agents of the Location *directory*: built-ins, then config entries, then agent files.

    Blocking (reads files). A later source overrides an earlier agent of the
    same name; a broken entry or file is skipped with a diagnostic. *config_tools* (the
    top-level ``tools``) switches tools on or off for every agent, under each agent's
    own ``tools``.
    """
    configured = rules_from_config(config_permission)
    agents = {
        n: agent_from_config(n, {}, configured=configured, base=a)
        for n, a in BUILTIN_AGENTS.items()
    }
    diagnostics: list[str] = []
    for name, entry in (config_agents or {}).items():
        _add(agents, diagnostics, name, f"config agent {name}", partial(dict, entry), configured)
    for path in _agent_files(directory):
        name = os.path.splitext(os.path.basename(path))[0]
        _add(agents, diagnostics, name, path, partial(_read_agent_file, path), configured)
    if config_tools:
        agents = {
            n: msgspec.structs.replace(a, tools={**config_tools, **a.tools})
            for n, a in agents.items()
        }
    return AgentLoad(agents=agents, diagnostics=diagnostics)


def _add(
    agents: dict[str, AgentInfo],
    diagnostics: list[str],
    name: str,
    source: str,
    read: Callable[[], dict[str, Any]],
    configured: Sequence[PermissionRule],
) -> None:
    try:
        agents[name] = agent_from_config(name, read(), configured=configured, base=agents.get(name))
    except (OSError, ValueError, TypeError, msgspec.ValidationError) as exc:
        diagnostics.append(f"{source}: {exc}")
        _log.warning("agent not loaded", extra={"source": source, "error": str(exc)})


def _agent_files(directory: str) -> list[str]:
    folder = os.path.join(directory, AGENT_DIR)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if n.endswith(".md")]


def _read_agent_file(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        entry, body = parse_front_matter(handle.read())
    return {**entry, "prompt": body} if body and "prompt" not in entry else entry
