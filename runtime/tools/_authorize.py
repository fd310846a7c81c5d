"""Authorizing one tool call under the effective agent of its provider turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from runtime.agents import (
    AgentInfo,
    PermissionGate,
    PermissionRequest,
    decide,
)
from runtime.tools._model import ToolContext, ToolFailure
from runtime.tools._tool import Tool

if TYPE_CHECKING:
    from runtime.tools._registry import ToolRegistry

__all__ = ["authorize", "call_resources", "permit"]


def call_resources(tool: Tool[Any], decoded: Any, registry: ToolRegistry) -> list[str]:
    """The resources of one call (``["*"]`` without an extractor). May raise ``ToolError``."""
    if tool.resources is None:
        return ["*"]
    return tool.resources(decoded, registry.env)


async def authorize(
    registry: ToolRegistry,
    tool: Tool[Any],
    decoded: Any,
    ctx: ToolContext,
    agent: AgentInfo,
    gate: PermissionGate | None,
) -> ToolFailure | None:
    """Return ``None`` when the call may run, else the failure to settle with.

    A configured deny fails at once (the gate is never asked); ``ask`` consults
    saved approvals, then the registry's hooks (which may also turn ``allow`` into
    ``deny`` or ``ask``), then *gate*. Cancellation propagates from the gate.
    """
    try:
        resources = call_resources(tool, decoded, registry)
    except Exception as exc:  # ToolError or an extractor bug: refuse the call
        await trio.lowlevel.checkpoint()
        return ToolFailure(error=str(exc) or type(exc).__name__)
    if tool.permission is None:
        await trio.lowlevel.checkpoint()
        return None
    return await permit(registry, tool.name, tool.permission, resources, ctx, agent, gate)


async def permit(
    registry: ToolRegistry,
    tool: str,
    permission: str,
    resources: list[str],
    ctx: ToolContext,
    agent: AgentInfo,
    gate: PermissionGate | None,
) -> ToolFailure | None:
    """Decide one use of *permission* on *resources* by the call *ctx* of *tool* under
    *agent*'s rules, as every tool call's is: ``None`` when it may go on, else the
    failure (denied by a rule, rejected by the user, or nobody to ask). ``ask`` consults
    saved approvals, then *gate*, and an ``always`` reply is saved. Cancellation
    propagates from the gate."""
    await trio.lowlevel.checkpoint()
    action = await decide(
        agent.permission, permission, resources, approvals=registry.saved_approvals,
        project=registry.env.project_key,
    )  # fmt: skip
    if action != "deny" and registry.hooks is not None:
        action = await registry.hooks.decide(tool, permission, resources, ctx, action)
    if action == "allow":
        return None
    described = f"{permission} on {', '.join(resources)}"
    if action == "deny":
        return ToolFailure(error=f"Permission denied: agent {agent.name} may not use {described}")
    if gate is None:
        return ToolFailure(error=f"Permission required for {described}, and nobody can be asked")
    request = PermissionRequest(
        id=registry.env.ids.new("per"),
        session_id=ctx.session_id,
        agent=agent.name,
        tool=tool,
        call_id=ctx.tool_call_id,
        permission=permission,
        resources=resources,
    )
    return await _ask(registry, gate, request)


async def _ask(
    registry: ToolRegistry, gate: PermissionGate, request: PermissionRequest
) -> ToolFailure | None:
    reply = await gate.ask(request)
    if reply == "reject":
        return ToolFailure(
            error=f"Permission rejected: {request.permission} on {', '.join(request.resources)}"
        )
    if reply == "always" and registry.saved_approvals is not None:
        for resource in request.resources:
            await registry.saved_approvals.save(
                registry.env.project_key, request.permission, resource
            )
    return None
