"""What the runtime gives every Location's plugins: their context, where their failures and
their sessions' events go."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

import msgspec

from actors.kernel import EventHub, Notice
from actors.session._config import Configuration
from actors.session._ports import SessionLocation
from runtime import SessionInfo, llm
from runtime.config import worktree_root
from runtime.context import SystemContextRegistry
from runtime.plugins import (
    LocationPlugins,
    PluginCandidate,
    PluginContext,
    PluginFailure,
    PluginLimits,
)
from runtime.tools import ToolRegistry
from storage import StoredEvent

__all__ = ["PluginSetup"]


class PluginSetup:
    """Makes each Location's :class:`LocationPlugins` and carries the session events to
    them (an observer of the event hub); failures become ``plugin.error`` notices.

    Args:
        hub: the event hub (its observer is added here).
        plugins: the embedding program's plugin objects, loaded first in every Location.
        limits: timeouts and queue bounds of every Location's plugins.
        infos: the infos of the sessions active here, by id (read, never changed).
        locations: the open Locations, by directory (read, never changed).
        credentials: the stored credential of a provider (what plugins' ``auth`` loaders
            are given).

    A session's events reach its Location's plugins once its Location is known here: it is
    active, was active, or was created in this process (the last ``max_sessions`` such
    sessions are remembered).
    """

    def __init__(
        self, hub: EventHub, plugins: Sequence[Any], limits: PluginLimits | None, *,
        infos: Mapping[str, SessionInfo], locations: Mapping[str, _HasPlugins],
        credentials: Callable[[str], llm.Credential | None] | None = None,
        max_sessions: int = 4096,
    ) -> None:  # fmt: skip
        self.hub = hub
        self._credentials = credentials
        self.embedded = tuple(plugins)
        self.limits = limits or PluginLimits()
        self.client: Any = None
        """What plugins get as their ``client`` (the runtime's API, set once it runs)."""
        self.server_url: str | None = None
        """The gateway's URL, once served (plugins' ``server_url``)."""
        self._infos = infos
        self._locations = locations
        self._directories: OrderedDict[str, str] = OrderedDict()
        self._max_sessions = max_sessions
        hub.add_observer(self._observe)

    def client_for(
        self, location: SessionLocation, configuration: Configuration | None
    ) -> llm.LLMClient | None:
        """The provider client of a Location whose plugins offer providers or provider
        options (their ``auth`` loaders'): its configuration with their entries under its
        own ``provider`` ones, and the loaders' options over both; ``None`` when they offer
        none, configuration is off, or the Location's configuration is in error."""
        offered, loaded = location.plugins.providers, location.plugins.auth_options
        if not (offered or loaded) or configuration is None or location.settings.error:
            return None
        data = location.settings.loaded.data
        providers = {**offered, **(data.get("provider") or {})}
        for provider, options in loaded.items():  # the loaders' options win
            entry = providers.get(provider) or {}
            providers[provider] = {**entry, "options": {**(entry.get("options") or {}), **options}}
        return configuration.client_for({**data, "provider": providers})

    def make(
        self, directory: str, registry: ToolRegistry, context: SystemContextRegistry
    ) -> LocationPlugins:
        """The plugins of the Location *directory* (nothing loaded until they are synced)."""
        return LocationPlugins(
            directory, registry=registry, context=context, limits=self.limits,
            make_context=partial(self._context, directory, registry.env.project_key),
            on_error=self._failed, credentials=self._credentials,
        )  # fmt: skip

    def _context(self, directory: str, project: str, candidate: PluginCandidate) -> PluginContext:
        return PluginContext(
            name=candidate.name, client=self.client, project=project, directory=directory,
            worktree=worktree_root(os.path.realpath(directory)), server_url=lambda: self.server_url,
            options=candidate.options, limits=self.limits.process,
        )  # fmt: skip

    def _failed(self, failure: PluginFailure) -> None:
        """``plugin.error`` for every-session subscribers."""
        properties = {"name": failure.plugin, "hook": failure.hook, "error": failure.message,
                      "required": failure.required}  # fmt: skip
        self.hub.publish_notice(
            Notice(type="plugin.error", properties=properties, directory=failure.directory)
        )

    def _observe(self, item: Any) -> None:
        """Hand each committed event to its session's Location's plugins."""
        if not isinstance(item, StoredEvent):
            return
        if item.type == "session.created":
            created = msgspec.json.decode(item.data, type=_Created)
            self.remember(item.aggregate_id, created.info.location.directory)
        plugins = self._plugins_of(item.aggregate_id)
        if plugins is not None:
            plugins.notify_event(item.type, item.aggregate_id, item.seq, item.data)

    def idle(self, session_id: str) -> None:
        """A session's drain chain ended: its Location's plugins hear ``session_idle``."""
        plugins = self._plugins_of(session_id)
        if plugins is not None:
            plugins.notify_idle(session_id)

    def _plugins_of(self, session_id: str) -> LocationPlugins | None:
        info = self._infos.get(session_id)
        if info is not None:
            directory: str | None = info.location.directory
            self.remember(session_id, info.location.directory)
        else:
            directory = self._directories.get(session_id)
        location = None if directory is None else self._locations.get(directory)
        return None if location is None else location.plugins

    def directory_of(self, session_id: str) -> str | None:
        """The Location directory of *session_id* when it is known here (see the class
        docstring), else None; reads nothing."""
        info = self._infos.get(session_id)
        return info.location.directory if info is not None else self._directories.get(session_id)

    def remember(self, session_id: str, directory: str) -> None:
        """Know *session_id*'s Location from now on (the last ``max_sessions`` are kept)."""
        self._directories[session_id] = directory
        self._directories.move_to_end(session_id)
        while len(self._directories) > self._max_sessions:
            self._directories.popitem(last=False)


class _HasPlugins(Protocol):
    @property
    def plugins(self) -> LocationPlugins: ...


class _Created(msgspec.Struct, frozen=True):
    info: SessionInfo
