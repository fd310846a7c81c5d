"""The plugin SDK's contract: the hook specifications (the values hooks receive are in
``runtime.plugins._values``).

A plugin implements any of these hooks with functions (or methods) marked ``@hookimpl``;
each may be ``async def`` or plain ``def``. Hooks are called one plugin at a time, in
load order, each call bounded by the host's hook timeout; a hook taking fewer arguments
than its specification receives only those it names (pluggy's rule).

Mutating hooks receive the current value and return a replacement, or ``None`` to leave
it as it is; the next plugin receives what the previous one returned. The value types
are frozen: build a changed one with ``msgspec.structs.replace``.

This module imports pluggy: it loads with the first plugin a Location loads (or the first
use of ``hookimpl``, ``hookspec``, ``PluginSpec`` or ``HOOK_NAMES``).
"""

from __future__ import annotations

from typing import Any, Final

import pluggy

from runtime import Prompt
from runtime.agents import PermissionAction
from runtime.context import SystemContext
from runtime.llm import ToolDefinition
from runtime.plugins._auth import ProviderAuth
from runtime.plugins._values import (
    PROJECT_NAME,
    ChatInfo,
    ChatMessage,
    ChatParams,
    CommandCall,
    CompactionPrompt,
    PermissionAsk,
    PluginEvent,
    Refusal,
    SessionRef,
    ShellEnvInfo,
    ToolCall,
    ToolLike,
    ToolResult,
)

__all__ = ["HOOK_NAMES", "PluginSpec", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class PluginSpec:
    """The hooks. Their names are the SDK's contract: a plugin implementing a name that is
    not here fails to load (the error says which)."""

    # -- plain hooks ------------------------------------------------------------------

    @hookspec
    def event(self, event: PluginEvent) -> None:
        """Every committed event of the Location's sessions, in order per session
        (delivered from a bounded queue: when it is full, events are dropped and counted)."""

    @hookspec
    def config(self, config: dict[str, Any]) -> None:
        """The Location's merged configuration (a copy), after loading and at each change."""

    @hookspec
    def tool(self) -> list[ToolLike] | None:
        """Tools to offer in the Location, asked once after loading and at each change of
        the configuration; each passes the same permission rules, hooks and bounding as a
        built-in."""

    @hookspec
    def context_source(self) -> SystemContext | list[SystemContext] | None:
        """The plugin's Context Sources, asked at each load of the System Context (each
        provider turn). Keys must be namespaced by the plugin's name (``<name>/...``); a
        changed value becomes a Mid-Conversation System Message."""

    @hookspec
    def shell_env(self, info: ShellEnvInfo) -> dict[str, str] | None:
        """Variables to set over the runtime's environment for a shell command (the
        ``shell`` tool, and the user's shell commands) in the Location."""

    @hookspec
    def provider(self) -> dict[str, Any] | None:
        """Provider entries, in the configuration's ``provider`` shape (``npm``,
        ``options.baseURL``, ``models``, ...), added to the Location's providers (the
        configuration's own entries win); asked with ``tool``."""

    @hookspec
    def auth(self) -> ProviderAuth | list[ProviderAuth] | None:
        """Login methods of providers (``kittiwake auth login``, ``GET /provider/auth``), and
        their loaders (the stored credential as provider options); asked with ``tool``."""

    @hookspec
    def dispose(self) -> None:
        """The plugin is unloaded (its configuration entry removed, or changed)."""

    # -- mutating hooks -----------------------------------------------------------------

    @hookspec
    def chat_message(self, message: ChatMessage, prompt: Prompt) -> Prompt | None:
        """A user message's parts (its ``text``, ``files`` and ``agents``) before it is
        admitted: what the plugins return is what is stored and what the model is sent.
        Called once per admission, before the durable write (an exact retry of an
        admitted message id does not call it again)."""

    @hookspec
    def chat_params(self, chat: ChatInfo, params: ChatParams) -> ChatParams | None:
        """The generation controls of a provider request."""

    @hookspec
    def chat_headers(self, chat: ChatInfo, headers: dict[str, str]) -> dict[str, str] | None:
        """HTTP headers added to a provider request."""

    @hookspec
    def system_transform(self, chat: ChatInfo, system: list[str]) -> list[str] | None:
        """The system part of a provider request (agent prompt, then the Baseline System
        Context). Changing it per turn defeats the provider's prompt cache."""

    @hookspec
    def tool_definition(self, chat: ChatInfo, definition: ToolDefinition) -> ToolDefinition | None:
        """One tool's definition as a provider request offers it (description, schema)."""

    @hookspec
    def tool_execute_before(self, call: ToolCall, args: Any) -> Any | Refusal | None:
        """A tool call's arguments (as the model sent them) before they are checked:
        return changed arguments, or a :class:`Refusal`."""

    @hookspec
    def tool_execute_after(
        self, call: ToolCall, args: Any, result: ToolResult
    ) -> ToolResult | None:
        """A tool's outcome after its handler, before it is bounded."""

    @hookspec
    def permission_ask(self, permission: PermissionAsk) -> PermissionAction | None:
        """``"allow"``, ``"deny"`` or ``"ask"`` for a call (``None``: no opinion). Asked for
        every call of a tool with a permission whose rules did not deny it."""

    @hookspec
    def command_execute_before(self, command: CommandCall, text: str) -> str | None:
        """A command's expanded text, before it is admitted as the session's prompt."""

    @hookspec
    def session_compacting(
        self, session: SessionRef, compaction: CompactionPrompt
    ) -> CompactionPrompt | None:
        """A compaction's summary request, before it is sent."""

    # -- lifecycle ------------------------------------------------------------------

    @hookspec
    def session_idle(self, session: SessionRef) -> None:
        """A session of the Location finished its drain: nothing left to do for now."""

    @hookspec
    def session_error(self, session: SessionRef, error: str) -> None:
        """A session's run failed (``session.run.failed``) with *error*."""

    @hookspec
    def session_stopping(self, session: SessionRef, continued: int) -> str | None:
        """A session's drain is about to stop: its last provider turn completed and asked
        for nothing more (no tool call, no steer, no queued prompt). Answer text to keep it
        going: the text becomes a synthetic user message and the drain runs another
        provider turn. *continued*: how many times this drain was kept going already (at
        most ``PluginLimits.max_continuations``; then the hook is not asked)."""


HOOK_NAMES: Final = frozenset(
    name for name, value in vars(PluginSpec).items() if callable(value) and not name.startswith("_")
)
"""The names of the SDK's hooks."""
