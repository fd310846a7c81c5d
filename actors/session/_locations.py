"""The Locations of a SessionExecution: one LocationState per working directory, opened
at first use (its configuration and agent files read, its tools and System Context
Registry built off the trio thread), read again where a client names an agent or model,
and the provider client its turns stream from."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import trio

from actors.kernel import EventHub, Notice
from actors.session._config import (
    Configuration,
    LocationSettings,
    instructions_producer,
    location_watch,
)
from actors.session._context import ContextFactory
from actors.session._location import LocationState
from actors.session._permissions import DurablePermissions
from actors.session._plugins import PluginSetup
from actors.session._ports import SessionLocation
from runtime import IdGenerator
from runtime.agents import AgentInfo
from runtime.config import CONFIG_INSTRUCTIONS_KEY, ConfigWatch, worktree_root
from runtime.context import SystemContextRegistry
from runtime.llm import LLMClient
from runtime.mcp import McpHost, McpOAuth
from runtime.tools import Skill, Tool, ToolEnvironment, ToolRegistry, load_skills, skill_tool

if TYPE_CHECKING:
    from actors.session._supervision import ExecutionSupervisor

__all__ = ["BlockingRunner", "LocationLoads", "LocationTools", "Locations", "ToolsFactory"]

ToolsFactory = Callable[[ToolEnvironment], ToolRegistry]
LocationTools = Callable[[], list[Tool[Any]]]
"""Builds the tools every Location's registry gets besides its own (the session tools)."""
LocationLoads = Literal["threaded", "inline"]
BlockingRunner = Callable[[Callable[[], Any]], Awaitable[Any]]


class Locations:
    """Opening and reading the Locations of ``SessionExecution`` (its base; it sets the
    attributes declared here)."""

    configuration: Configuration | None
    agents: Mapping[str, AgentInfo] | None
    ids: IdGenerator
    hub: EventHub
    llm: LLMClient
    plugins: PluginSetup
    permissions: DurablePermissions
    mcp_oauth: McpOAuth
    mcp_host: McpHost | None
    supervisor: ExecutionSupervisor
    location_tools: LocationTools | None
    _tools: ToolsFactory
    _context: ContextFactory
    _data_dir: Path
    _locations: dict[str, LocationState]
    _opening: dict[str, trio.Event]
    _loads: LocationLoads
    _run_blocking: BlockingRunner

    def location_for(self, directory: str) -> LocationState:
        """The Location of *directory*, opened already: every drain and entry point opens
        its Location with :meth:`location` first, so nothing is read here.

        Raises:
            LookupError: *directory* was not opened by :meth:`location`.
        """
        location = self._locations.get(directory)
        if location is None:
            raise LookupError(f"the Location {directory!r} is not open; open it with location()")
        return location

    async def location(self, directory: str) -> LocationState:
        """The Location of *directory*, opened at first use: its configuration and agent
        files are read and its custom tools imported by the ``location_loads`` runner (a
        worker thread unless the runtime runs them inline); concurrent callers share one
        opening.

        On cancellation the read is not abandoned (an import cannot be undone halfway):
        the caller waits for it to end, the Location opens, and ``Cancelled`` is raised
        at the caller's next checkpoint. A read that fails raises its error here and
        opens nothing; the next caller tries again.
        """
        while True:
            location = self._locations.get(directory)
            if location is not None:
                return location
            opening = self._opening.get(directory)
            if opening is not None:
                await opening.wait()
                continue
            opening = self._opening[directory] = trio.Event()
            try:
                parts = await self._run_blocking(lambda: self._read_location(directory))
                return self._adopt(directory, *parts)
            finally:
                del self._opening[directory]
                opening.set()

    def _read_location(
        self, directory: str
    ) -> tuple[
        ConfigWatch[LocationSettings], LocationSettings, ToolRegistry, SystemContextRegistry,
        dict[str, Skill],
    ]:  # fmt: skip
        """The blocking part of opening a Location: read its configuration and agent
        files, build its tool registry (importing ``.kittiwake/tool/*.py``) and its System
        Context Registry. Touches no trio state, so it may run in a worker thread."""
        watch = location_watch(
            directory, self.configuration, self.agents, threaded=self._loads == "threaded",
            plugins=self.plugins.embedded,
        )  # fmt: skip
        settings = watch.load_now()
        env = ToolEnvironment(
            directory=directory, data_dir=str(self._data_dir), ids=self.ids,
            limits=settings.tool_output_limits(),
        )  # fmt: skip
        skills = self._read_skills(directory)
        return watch, settings, self._tools(env), self._context(directory), skills

    def _read_skills(self, directory: str) -> dict[str, Skill]:
        """The Location's skills (blocking: the ``location_loads`` runner runs it). Without
        configuration only its own folders are read, not the user's."""
        env = self.configuration.env if self.configuration is not None else None
        return load_skills(directory, env).skills

    async def rescan_skills(self, location: LocationState) -> dict[str, Skill]:
        """Read *location*'s skill folders again, off the trio thread; its skill catalog
        (and the ``skill`` tool's description) follows. Cancellation waits for the read."""
        location.skills = await self._run_blocking(lambda: self._read_skills(location.directory))
        location.registry.forget_definitions()
        return location.skills

    def _adopt(
        self, directory: str, watch: ConfigWatch[LocationSettings], settings: LocationSettings,
        registry: ToolRegistry, context: SystemContextRegistry, skills: dict[str, Skill],
    ) -> LocationState:  # fmt: skip
        if registry.saved_approvals is None:
            registry.saved_approvals = self.permissions
        plugins = self.plugins.make(directory, registry, context)
        location = LocationState(
            directory, registry, context, watch, settings, plugins,
            mcp_auth=self.mcp_oauth.auth,
        )  # fmt: skip
        location.skills = skills
        location.mcp.on_tools_changed = partial(self._mcp_tools_changed, directory)
        location.mcp.host = self.mcp_host
        if self.supervisor._nursery is not None:  # servers start lazily, inside this task
            self.supervisor._nursery.start_soon(location.language_servers.run)
            self.supervisor._nursery.start_soon(location.mcp.run)
            self.supervisor._nursery.start_soon(location.plugins.run)
        if self.location_tools is not None:
            tools = self.location_tools()
            rescan = partial(self.rescan_skills, location)
            tools.append(skill_tool(lambda: location.skills, rescan=rescan))
            registry.contribute(tools)
            location.task_tool = next((t for t in tools if t.name == "task"), None)
            location.describe_subagents()
        if self.configuration is not None:
            context.contribute(
                CONFIG_INSTRUCTIONS_KEY,
                instructions_producer(
                    lambda: location.settings, directory=directory,
                    root=worktree_root(os.path.realpath(directory)), home=self.configuration.env.get("HOME", ""),
                ),
            )  # fmt: skip
        self._locations[directory] = location
        return location

    def _mcp_tools_changed(self, directory: str, server: str) -> None:
        """OpenCode's ``mcp.tools.changed`` for every-session subscribers."""
        notice = Notice(
            type="mcp.tools.changed", properties={"server": server}, directory=directory
        )
        self.hub.publish_notice(notice)

    async def ready_location(self, directory: str) -> LocationState:
        """:meth:`current_location`, once the Location's plugins are loaded: where a drain
        starts. Raises ``PluginsNotReady`` when a required plugin failed to load."""
        location = await self.current_location(directory)
        await location.ready()
        return location

    async def current_location(self, directory: str) -> LocationState:
        """The Location of *directory* (see :meth:`location`) with its configuration and
        agent files read again if they changed (use it where a client names an agent or a
        model, and at each provider turn)."""
        location = await self.location(directory)
        await location.refresh()
        return location

    def client_for(self, location: SessionLocation) -> LLMClient:
        """The provider client turns in *location* stream from: the one its configuration
        builds (its providers, and its plugins'), else the runtime's."""
        plugins = self.plugins.client_for(location, self.configuration)
        return plugins or location.settings.llm or self.llm
