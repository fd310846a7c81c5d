"""Agents: a named binding of instructions, model, step budget, tool switches and rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Final, Literal, TypeAlias

import msgspec

from runtime.agents._permissions import PermissionRule

__all__ = [
    "BASE_RULES",
    "PLAN_RULES",
    "compose_rules",
    "AgentInfo",
    "AgentMode",
    "BUILD",
    "BUILTIN_AGENTS",
    "DEFAULT_AGENT",
    "EXPLORE",
    "GENERAL",
    "PLAN",
    "resolve_agent",
]

AgentMode: TypeAlias = Literal["primary", "subagent", "all"]
DEFAULT_AGENT: Final = "build"


class AgentInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One agent.

    ``tools`` switches tools on or off by name (``fnmatch`` keys, the last match
    wins, unlisted tools are on); ``permission`` rules decide each call.
    """

    name: str
    mode: AgentMode = "primary"
    description: str | None = None
    model: str | None = None
    prompt: str | None = None
    steps: int | None = None
    tools: dict[str, bool] = {}
    permission: list[PermissionRule] = []
    builtin: bool = False

    def tool_enabled(self, tool: str) -> bool:
        """Tell whether this agent's ``tools`` map leaves *tool* switched on."""
        enabled = True
        for pattern, on in self.tools.items():
            if fnmatchcase(tool, pattern):
                enabled = on
        return enabled


BASE_RULES: Final = (
    PermissionRule(permission="*", action="allow"),
    PermissionRule(permission="mcp_sampling", action="ask"),
)
"""Every agent's first rules: everything allowed, but an MCP server's use of the
session's model (``mcp_sampling``), which is asked."""
PLAN_RULES: Final = (
    PermissionRule(permission="edit", action="deny"),
    PermissionRule(permission="bash", action="deny"),
)


def compose_rules(
    configured: Sequence[PermissionRule], own: Sequence[PermissionRule]
) -> list[PermissionRule]:
    """An agent's effective rules: defaults, then the project's ``permission`` config, then
    the agent's own rules (the last matching rule wins, so later layers override)."""
    return [*BASE_RULES, *configured, *own]


BUILD: Final = AgentInfo(
    name="build",
    description="Default agent with full access to the Location's tools.",
    tools={"plan_exit": False},
    permission=compose_rules((), ()),
    builtin=True,
)

PLAN: Final = AgentInfo(
    name="plan",
    description="Read-only agent for analysis and planning; edits and shell commands are denied.",
    tools={"plan_enter": False},
    permission=compose_rules((), PLAN_RULES),
    builtin=True,
)

_CHILD_TOOLS: Final = {
    "task": False, "todowrite": False, "todoread": False, "question": False,
    "plan_enter": False, "plan_exit": False,
}  # fmt: skip
"""What a subagent leaves off: it neither delegates, plans with the user, nor asks."""

GENERAL: Final = AgentInfo(
    name="general",
    mode="subagent",
    description=(
        "General-purpose agent for researching complex questions and executing multi-step "
        "tasks; can run several units of work in parallel."
    ),
    tools=dict(_CHILD_TOOLS),
    permission=compose_rules((), ()),
    builtin=True,
)

EXPLORE: Final = AgentInfo(
    name="explore",
    mode="subagent",
    description=(
        "Fast read-only agent for exploring codebases: finds files by pattern, searches "
        "code for keywords, and answers questions about how the code works."
    ),
    tools={**_CHILD_TOOLS, "write": False, "edit": False, "apply_patch": False},
    permission=compose_rules((), ()),
    builtin=True,
)

BUILTIN_AGENTS: Final[Mapping[str, AgentInfo]] = {
    "build": BUILD, "plan": PLAN, "general": GENERAL, "explore": EXPLORE,
}  # fmt: skip

_DENY_ALL: Final = AgentInfo(
    name="none", permission=[PermissionRule(permission="*", action="deny")]
)


def resolve_agent(agents: Mapping[str, AgentInfo], name: str | None) -> AgentInfo:
    """Return the agent called *name*, or the default (``build``, else the first primary).

    An omitted name uses the default, so execution and permission checks agree.
    A name that resolves to nothing gets an agent that denies every permission.
    """
    if name is not None:
        found = agents.get(name)
        return found if found is not None else msgspec.structs.replace(_DENY_ALL, name=name)
    if DEFAULT_AGENT in agents:
        return agents[DEFAULT_AGENT]
    primary = [a for a in agents.values() if a.mode in ("primary", "all")]
    return primary[0] if primary else _DENY_ALL
