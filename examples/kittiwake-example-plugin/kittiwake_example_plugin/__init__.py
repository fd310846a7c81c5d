"""An example Kittiwake plugin: one tool, one Context Source, a write policy, a shell
environment. Kittiwake makes one ``ExamplePlugin`` per Location (its entry point names the
class), handing it the Location's context and the options of its configuration entry::

    {"plugin": [["kittiwake-example-plugin", {"allowed": "src/", "notes": "TEAM_NOTES.md"}]]}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import msgspec
import trio

from runtime.plugins import (
    UNAVAILABLE,
    PermissionAsk,
    PluginContext,
    ShellEnvInfo,
    SystemContext,
    ToolCall,
    ToolError,
    hookimpl,
    plugin_tool,
)

__all__ = ["ExamplePlugin"]

NOTES_KEY = "example/team-notes"
MAX_NOTES_BYTES = 16 * 1024


class ExamplePlugin:
    """The plugin of one Location."""

    name = "example"  # the namespace of its Context Source keys, however it is found

    def __init__(self, context: PluginContext, options: dict[str, Any]) -> None:
        self.context = context
        self.allowed = str(options.get("allowed", "src/"))
        self.notes = Path(context.directory) / str(options.get("notes", "TEAM_NOTES.md"))

    # -- a tool ---------------------------------------------------------------------------

    @hookimpl
    def tool(self) -> list[Any]:
        directory = Path(self.context.directory)

        @plugin_tool
        async def count_lines(
            path: Annotated[str, msgspec.Meta(description="A file, relative to the project")],
            call: ToolCall,
        ) -> dict[str, Any]:
            """Count the lines of a text file in the project."""

            def read() -> str:  # in a worker thread: file system calls block
                target = (directory / path).resolve()
                if not target.is_relative_to(directory.resolve()) or not target.is_file():
                    raise ToolError(f"Not a file in the project: {path}")
                return target.read_text(errors="replace")

            text = await trio.to_thread.run_sync(read)
            return {"path": path, "lines": len(text.splitlines()), "agent": call.agent}

        return [count_lines]

    # -- a Context Source -------------------------------------------------------------------

    @hookimpl
    def context_source(self) -> SystemContext:
        return SystemContext.make(
            NOTES_KEY, str, self._read_notes,
            baseline=lambda notes: f"The team's notes for this project:\n{notes}",
            update=lambda notes: f"The team's notes for this project changed; they now read:\n{notes}",
            removal=lambda _: "The team's notes were removed; they no longer apply.",
        )  # fmt: skip

    async def _read_notes(self) -> str | Any:
        """The notes file's text (at most 16 KiB), or ``(no notes)``; unavailable while it
        cannot be read (the admitted notes stand)."""

        def read() -> str:
            try:
                with open(self.notes, "rb") as handle:
                    data = handle.read(MAX_NOTES_BYTES)
            except FileNotFoundError:
                return "(no notes)"
            return data.decode("utf-8", errors="replace").strip() or "(no notes)"

        try:
            return await trio.to_thread.run_sync(read)
        except OSError:
            return UNAVAILABLE

    # -- a policy ---------------------------------------------------------------------------

    @hookimpl
    def permission_ask(self, permission: PermissionAsk) -> str | None:
        """Deny file changes outside the allowed folder; no opinion on anything else."""
        if permission.permission != "edit":
            return None
        outside = [r for r in permission.resources if not r.startswith(self.allowed)]
        return "deny" if outside else None

    # -- a shell environment ---------------------------------------------------------------

    @hookimpl
    def shell_env(self, info: ShellEnvInfo) -> dict[str, str]:
        return {"KITTIWAKE_EXAMPLE": "1", "PROJECT_ROOT": self.context.worktree,
                "EXAMPLE_CWD": os.path.relpath(info.cwd, self.context.directory)}  # fmt: skip
