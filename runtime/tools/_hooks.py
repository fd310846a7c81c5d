"""The hooks every tool call passes: what a Location's plugins see of its Tool Registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from runtime.agents import PermissionAction
from runtime.tools._model import ToolContext, ToolFailure, ToolOutput

__all__ = ["ToolHooks"]


class ToolHooks(Protocol):
    """Consulted by ``ToolRegistry.settle`` for every call of every tool it holds (built-in,
    custom, MCP, session tools; a subagent's calls too, its child session being in the same
    Location), in this order: :meth:`before` once the tool is found and enabled,
    :meth:`decide` once the agent's rules decided a call of a tool with a permission,
    :meth:`after` once the handler settled (before bounding). :meth:`shell_env` is asked by
    the ``shell`` tool for the environment its command runs with.

    Each may raise ``trio.Cancelled`` (the call is then interrupted); any other failure
    is the implementation's to contain (a raising hook fails the call).
    """

    async def before(self, tool: str, input: Any, ctx: ToolContext) -> Any | ToolFailure:
        """The input the call runs with (*input* itself, or a changed one), or a failure
        refusing the call (nothing runs)."""
        ...

    async def decide(
        self, tool: str, permission: str, resources: list[str], ctx: ToolContext,
        action: PermissionAction,
    ) -> PermissionAction:  # fmt: skip
        """The action for a call the rules decided *action* (``allow`` or ``ask``; a
        configured ``deny`` is final and not asked about)."""
        ...

    async def after(
        self, tool: str, input: Any, ctx: ToolContext, outcome: ToolOutput | ToolFailure
    ) -> ToolOutput | ToolFailure:
        """The handler's outcome as the model is to see it (before bounding)."""
        ...

    async def shell_env(self, ctx: ToolContext, cwd: str) -> Mapping[str, str]:
        """Variables set over the runtime's environment for a shell command run in *cwd*."""
        ...
