"""An open Location (working directory) and the rule a Location's directory follows."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio
from msgspec import UnsetType

from runtime import InvalidSessionInputError
from runtime.agents import AgentInfo
from runtime.config import ConfigWatch
from runtime.context import SystemContext, SystemContextRegistry
from runtime.llm import ToolDefinition
from runtime.mcp import McpAuth, McpServers
from runtime.plugins import LocationPlugins
from runtime.tools import (
    LanguageServers,
    Skill,
    Tool,
    ToolContribution,
    ToolRegistry,
    lsp_tool,
    task_description,
    webfetch_tool,
    websearch_tool,
)

if TYPE_CHECKING:
    from actors.session._config import LocationSettings

__all__ = ["LocationState", "check_directory"]


class LocationState:
    """One open Location (working directory): its tool registry, its System Context
    Registry, and what its configuration decides (agents, default model, provider
    client), read again by :meth:`refresh` at each provider turn when a file changed.

    Its registry gets ``webfetch`` (under the current ``webfetch`` settings) and, while
    the configuration names a backend, ``websearch``, each as a contribution of its own;
    and ``lsp`` over its :class:`LanguageServers`, which also append diagnostics to edits
    (whoever opens the Location runs ``language_servers.run`` in a nursery). Its MCP
    servers (``mcp``) follow the configuration at each :meth:`refresh`, which also
    brings their tools into the registry (whoever opens the Location runs ``mcp.run``).
    Its plugins (``plugins``, the registry's hooks while one implements them) follow it
    too (whoever opens the Location runs ``plugins.run``); :meth:`ready` waits for them.

    A plain object, not an actor: nothing is sent to it. Its callers are the tasks of
    one trio run; :meth:`observe_context` shares one observation between concurrent
    callers and :meth:`refresh` reads in a worker thread only after a change.
    """

    def __init__(
        self, directory: str, registry: ToolRegistry, context: SystemContextRegistry,
        watch: ConfigWatch[LocationSettings], settings: LocationSettings,
        plugins: LocationPlugins,
        mcp_auth: McpAuth | None = None,
    ) -> None:  # fmt: skip
        self.directory = directory
        self.plugins = plugins  # the registry's hooks while a plugin implements one
        plugins.sync(settings.plugins, settings.loaded.data)
        self.registry = registry
        self.context = context
        self._watch = watch
        self.settings = settings
        """The last reading of *watch* (the first is *settings*)."""
        self._next: trio.Event | None = None
        self._result: SystemContext | None = None
        self._loading = False
        self.observations = 0
        self.skills: dict[str, Skill] = {}
        """The Location's skills as last read (see :meth:`SessionExecution.rescan_skills`)."""
        self.task_tool: Tool[Any] | None = None
        """The ``task`` tool of this Location, whose description lists its subagents."""
        self._web = registry.contribute(webfetch_tool(lambda: self.settings.webfetch_limits()))
        self._search: ToolContribution | None = None
        self._sync_search()
        self.language_servers = LanguageServers(
            directory, lambda: self.settings.language_servers, lambda: self.settings.lsp_limits()
        )
        registry.edit_observer = self.language_servers
        self._lsp = registry.contribute(lsp_tool(self.language_servers))
        self.mcp = McpServers(
            directory, registry, specs=lambda: self.settings.mcp_servers,
            data_dir=registry.env.data_dir, auth=mcp_auth,
            search=lambda: self.settings.mcp_tool_search,
        )  # fmt: skip
        self.mcp.agent_of = self.agent
        self.session_mcp: dict[str, list[McpServers]] = {}
        """MCP servers of one session's own (an editor's), by session: their tools are
        that session's alone; whoever adds them runs and removes them."""

    def _sync_search(self) -> None:
        """Offer ``websearch`` exactly while the configuration names a backend."""
        configured = self.settings.websearch_settings()
        if configured is None and self._search is not None:
            self._search.close()
            self._search = None
        elif configured is not None and self._search is None:
            self._search = self.registry.contribute(
                websearch_tool(lambda: self.settings.websearch_settings() or configured)
            )

    def describe_subagents(self) -> None:
        """List the Location's subagents in its ``task`` tool's description."""
        if self.task_tool is not None:
            subagents = [
                (a.name, a.description or "")
                for a in self.settings.agents.values()
                if a.mode in ("subagent", "all")
            ]
            self.task_tool.description = task_description(subagents)

    @property
    def agents(self) -> Mapping[str, AgentInfo]:
        """The Location's agents as last read: built-ins, configuration, agent files."""
        return self.settings.agents

    def agent(self, name: str | None) -> AgentInfo:
        """The agent called *name*, else the configured default agent (``build``)."""
        return self.settings.agent(name)

    def tools_for(
        self, agent: AgentInfo, found: list[str] | UnsetType, session_id: str | None = None
    ) -> list[ToolDefinition]:
        """The tools *agent* is offered at a provider turn of *session_id*, whose tool
        search found *found* (``SessionInfo.mcp_tools``): the session's own tools too;
        while MCP tool search stands in for the MCP tools, only those of them it found."""
        for servers in self.session_mcp.get(session_id or "", ()):
            servers.apply()
        definitions = self.registry.definitions(agent, session_id)
        return self.mcp.offered(definitions, found if isinstance(found, list) else ())

    async def refresh(self) -> LocationSettings:
        """Read the configuration and agent files again if one changed (a few ``lstat``
        calls when none did), and bring the MCP servers' current tools into the registry.
        Cancellation waits for a running read to end."""
        settings = await self._watch.load()
        if settings is not self.settings:
            self.settings = settings
            self.describe_subagents()
            self._sync_search()
            self.mcp.sync()
            self.plugins.sync(settings.plugins, settings.loaded.data)
        self.mcp.apply()
        return self.settings

    async def ready(self) -> None:
        """Wait until the Location's plugins are loaded (a configuration change reloads
        them), then have their ``auth`` loaders read the stored credentials (a login since
        the last turn applies from this one on). Raises ``PluginsNotReady`` when a required
        plugin failed."""
        await self.plugins.wait_ready()
        await self.plugins.load_credentials()

    async def observe_context(self) -> SystemContext:
        """Observe the Location's System Context; concurrent callers share one observation.

        A caller arriving while an observation runs waits for the next one, so every
        caller gets values loaded after it asked. Cancellation abandons the wait.
        """
        if self._next is None:
            self._next = trio.Event()
        waiting_for = self._next
        if not self._loading:
            self._loading = True
            try:
                while self._next is not None:
                    done, self._next = self._next, None
                    self._result = await self.context.load()
                    self.observations += 1
                    done.set()
            finally:
                self._loading = False
        else:
            await waiting_for.wait()
        assert self._result is not None
        return self._result


def check_directory(directory: str) -> None:
    """Refuse a Location directory that is not an absolute path to an existing directory.

    Raises:
        InvalidSessionInputError: with ``field`` ``"location"``.
    """
    if not os.path.isabs(directory):
        raise InvalidSessionInputError(
            "location", f"The directory must be an absolute path, got {directory!r}"
        )
    if not os.path.isdir(directory):
        raise InvalidSessionInputError(
            "location", f"The directory does not exist or is not a directory: {directory}"
        )
