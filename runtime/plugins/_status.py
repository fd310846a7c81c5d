"""What a Location's plugins are bounded by and report: their limits, each plugin's state
and status, a plugin's failure as ``plugin.error`` carries it, and the errors a failed
required plugin raises (``PluginHost`` in ``runtime/plugins/_host.py`` uses them)."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from runtime.plugins._context import ProcessLimits

__all__ = [
    "PluginFailure",
    "PluginHookError",
    "PluginLimits",
    "PluginState",
    "PluginStatus",
    "PluginsNotReady",
]

PluginState: TypeAlias = Literal["loading", "ready", "failed"]


class PluginLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of a Location's plugins: seconds for one hook call, seconds for making a
    plugin (its factory, then its ``tool`` answer), lifecycle events queued for the
    ``event`` hooks (more are dropped and counted), seconds for finishing a login, how many
    times ``session_stopping`` may keep one drain going, and what ``PluginContext.run``
    allows."""

    hook_timeout: float = 10.0
    init_timeout: float = 30.0
    event_queue: int = 1024
    login_timeout: float = 300.0
    """Seconds an ``oauth`` method's callback may take (it may wait for a browser)."""
    max_continuations: int = 3
    """Times ``session_stopping`` may keep one drain going (a plugin that always answers
    cannot make a drain run forever)."""
    process: ProcessLimits = ProcessLimits()


class PluginStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One plugin of a Location: where it came from, its state, whether it is required,
    the hooks it implements, its last error and how many it had."""

    name: str
    source: str
    origin: str
    state: PluginState
    required: bool = False
    hooks: list[str] = []
    error: str | None = None
    errors: int = 0


class PluginFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin's failure, as ``plugin.error`` carries it: which plugin, which hook
    (``load`` when it could not be made), what happened, in which Location."""

    plugin: str
    hook: str
    message: str
    directory: str
    required: bool = False


class PluginHookError(Exception):
    """A required plugin's hook failed: the call, or the provider turn, fails with it."""


class PluginsNotReady(Exception):
    """A required plugin of the Location failed to load: sessions there do not start."""
