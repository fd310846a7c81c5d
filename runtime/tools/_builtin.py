"""The built-in tools of every Location.

Later auxiliary tools (web, todo, question, plan, task, skill, lsp) join the
same registry as further scoped contributions.
"""

from __future__ import annotations

from typing import Any

from runtime.agents import SavedApprovals
from runtime.tools._model import ToolEnvironment
from runtime.tools._patch import apply_patch_tool
from runtime.tools._read import ReadLimits, read_tool
from runtime.tools._registry import ToolRegistry
from runtime.tools._search import SearchLimits, glob_tool, grep_tool
from runtime.tools._shell import ShellLimits, shell_tool
from runtime.tools._tool import Tool
from runtime.tools._write import edit_tool, write_tool

__all__ = ["builtin_tools", "location_registry"]


def builtin_tools(
    *,
    read: ReadLimits | None = None,
    search: SearchLimits | None = None,
    shell: ShellLimits | None = None,
) -> list[Tool[Any]]:
    """``read``, ``write``, ``edit``, ``apply_patch``, ``glob``, ``grep`` and ``shell``."""
    return [
        read_tool(read),
        write_tool(),
        edit_tool(),
        apply_patch_tool(),
        glob_tool(search),
        grep_tool(search),
        shell_tool(shell),
    ]


def location_registry(
    env: ToolEnvironment,
    *,
    saved_approvals: SavedApprovals | None = None,
    read: ReadLimits | None = None,
    search: SearchLimits | None = None,
    shell: ShellLimits | None = None,
) -> ToolRegistry:
    """A registry for the Location *env* holding the built-in tools as one contribution."""
    registry = ToolRegistry(env, saved_approvals=saved_approvals)
    registry.contribute(builtin_tools(read=read, search=search, shell=shell))
    return registry
