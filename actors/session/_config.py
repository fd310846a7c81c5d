"""What a Location's configuration decides: its agents, default model, provider client and
configured instructions, re-read at each provider turn when a file changed."""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from actors.session._turn import report_retry
from runtime import SessionInfo, llm
from runtime import events as ev
from runtime.agents import AgentInfo, load_agents, resolve_agent
from runtime.compaction import CompactionSettings
from runtime.config import (
    ConfigError,
    ConfigWatch,
    LoadedConfig,
    config_candidates,
    config_instructions_source,
    find_instruction_files,
    load_config,
)
from runtime.context import SystemContext
from runtime.mcp import McpServerSpec, McpToolSearch, tool_search
from runtime.mcp import server_specs as mcp_server_specs
from runtime.plugins import PluginCandidate, discover_plugins
from runtime.tools import (
    AddressPolicy,
    LspLimits,
    ServerSpec,
    ToolOutputLimits,
    WebFetchLimits,
    WebSearchSettings,
    server_specs,
)

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Configuration",
    "LocationSettings",
    "ProviderClients",
    "location_watch",
    "session_model",
]

_log = logging.getLogger("kittiwake.config")
_PROVIDER_KEYS: Final = ("provider", "enabled_providers", "disabled_providers")
_AGENT_DIR: Final = os.path.join(".kittiwake", "agent")


class Configuration:
    """How Locations read configuration (``open_runtime(configuration=...)``).

    Args:
        env: the environment configuration sources come from (``KITTIWAKE_CONFIG``,
            ``KITTIWAKE_CONFIG_CONTENT``, ``XDG_CONFIG_HOME``, ``HOME``, ``{env:}``).
        llm_for: builds the provider client for a Location's merged configuration data
            (models.dev plus its ``provider`` entries); called again only when the
            provider keys change. ``None`` keeps the runtime's one client.
        pinned_model: a model that wins over every Location's ``model`` (the
            ``KITTIWAKE_MODEL`` variable).
        max_clients: distinct provider configurations whose clients are kept.
    """

    def __init__(
        self, *, env: Mapping[str, str],
        llm_for: Callable[[Mapping[str, Any]], llm.LLMClient] | None = None,
        pinned_model: ev.ModelRef | None = None, max_clients: int = 16,
    ) -> None:  # fmt: skip
        self.env = dict(env)
        self.pinned_model = pinned_model
        self._llm_for = llm_for
        self._clients: OrderedDict[bytes, llm.LLMClient] = OrderedDict()
        self._max_clients = max_clients

    def client_for(self, data: Mapping[str, Any]) -> llm.LLMClient | None:
        """The provider client for configuration *data* (shared by equal provider keys);
        None (the runtime's own client) when *data* configures no provider."""
        if self._llm_for is None or not any(k in data for k in _PROVIDER_KEYS):
            return None
        key = msgspec.json.encode({k: data.get(k) for k in _PROVIDER_KEYS})
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._llm_for(data)
            while len(self._clients) > self._max_clients:
                self._clients.popitem(last=False)
        self._clients.move_to_end(key)
        return client


class ProviderClients:
    """Provider clients over one shared HTTP client: one per distinct provider
    configuration (models.dev plus that configuration's ``provider`` entries).

    The HTTP client is made at the first call (so serving without providers never
    imports it); :meth:`aclose` closes it.
    """

    def __init__(
        self, catalog: llm.Catalog, auth: llm.Auth, *, max_requests: int | None = None
    ) -> None:
        """*max_requests*: provider requests in flight at once over the shared client
        (more wait for one to end, up to the pool timeout); the transport's default when
        None."""
        self.catalog = catalog
        self._auth = auth
        self._max_requests = max_requests
        self._http: httpx.AsyncClient | None = None

    def __call__(self, data: Mapping[str, Any]) -> llm.ProviderClient:
        """A client routing by the catalog extended with configuration *data*."""
        if self._http is None:
            if self._max_requests is None:
                self._http = llm.provider_http_client()
            else:
                self._http = llm.provider_http_client(max_connections=self._max_requests)
        catalog = self.catalog.with_config(data) if data else self.catalog
        return llm.ProviderClient(
            catalog, self._auth, http_client=self._http, on_retry=report_retry
        )

    async def aclose(self) -> None:
        """Close the shared HTTP client, if one was made."""
        if self._http is not None:
            await self._http.aclose()


@dataclass(frozen=True, slots=True)
class LocationSettings:
    """One reading of a Location's configuration and agent files."""

    loaded: LoadedConfig
    agents: Mapping[str, AgentInfo]
    model: ev.ModelRef | None = None
    small_model: ev.ModelRef | None = None
    default_agent: str | None = None
    llm: llm.LLMClient | None = None
    error: str | None = None
    """Why the configuration cannot be used; provider turns fail with it until fixed."""
    diagnostics: list[str] = field(default_factory=list)
    language_servers: list[ServerSpec] = field(default_factory=list)
    """The servers of ``lsp`` (and the built-ins found on PATH), resolved at reading."""
    mcp_servers: dict[str, McpServerSpec] = field(default_factory=dict)
    """The servers of ``mcp``, by name."""
    mcp_tool_search: McpToolSearch | None = field(default_factory=McpToolSearch)
    """MCP tool search (``experimental.mcp_tool_search``; None: off)."""
    plugins: list[PluginCandidate] = field(default_factory=list)
    """The plugins found (entry points, ``plugin``, plugin folders), imported, in load order."""

    def agent(self, name: str | None) -> AgentInfo:
        """The agent called *name*, else the configured ``default_agent``, else ``build``."""
        return resolve_agent(self.agents, name if name is not None else self.default_agent)

    def tool_output_limits(self) -> ToolOutputLimits:
        """The Model Tool Output bound from ``tool_output`` (defaults for what is unset)."""
        configured = self.loaded.config.tool_output
        if configured is None:
            return ToolOutputLimits()
        fields = {"max_lines": configured.max_lines, "max_bytes": configured.max_bytes}
        return ToolOutputLimits(**{k: v for k, v in fields.items() if v is not None})

    def compaction(self) -> CompactionSettings:
        """The compaction settings from ``compaction`` (defaults for what is unset;
        ``buffer`` wins over its OpenCode spelling ``reserved``)."""
        configured = self.loaded.config.compaction
        if configured is None:
            return CompactionSettings()
        buffer = configured.buffer if configured.buffer is not None else configured.reserved
        default = CompactionSettings()
        return CompactionSettings(
            auto=default.auto if configured.auto is None else configured.auto,
            prune=default.prune if configured.prune is None else configured.prune,
            buffer=default.buffer if buffer is None else buffer,
            keep_tokens=(
                default.keep_tokens
                if configured.preserve_recent_tokens is None
                else configured.preserve_recent_tokens
            ),
            tail_turns=configured.tail_turns,
        )

    def lsp_limits(self) -> LspLimits:
        """The language server timeouts from ``language_servers`` (defaults for what is
        unset: idle 300 s, start 20 s, request 10 s, diagnostics 5 s)."""
        configured = self.loaded.config.language_servers
        if configured is None:
            return LspLimits()
        fields = msgspec.structs.asdict(configured)
        return LspLimits(**{k: v for k, v in fields.items() if v is not None})

    def webfetch_limits(self) -> WebFetchLimits:
        """The ``webfetch`` bounds and address policy from ``webfetch`` (defaults for
        what is unset: public addresses only, 5 MiB, 5 redirects, 30 s)."""
        configured = self.loaded.config.webfetch
        if configured is None:
            return WebFetchLimits()
        policy = AddressPolicy(
            allow_loopback=bool(configured.allow_loopback),
            allow_private=bool(configured.allow_private),
        )
        fields: dict[str, Any] = {
            "max_bytes": configured.max_bytes, "max_redirects": configured.max_redirects,
            "timeout": configured.timeout, "max_timeout": configured.max_timeout,
        }  # fmt: skip
        return WebFetchLimits(policy=policy, **{k: v for k, v in fields.items() if v is not None})

    def websearch_settings(self) -> WebSearchSettings | None:
        """The configured ``websearch`` backend, or None (the tool is then not offered)."""
        configured = self.loaded.config.websearch
        if configured is None:
            return None
        fields: dict[str, Any] = {
            "max_results": configured.max_results,
            "timeout": configured.timeout,
        }
        return WebSearchSettings(
            backend=configured.backend, url=configured.url, api_key=configured.apiKey,
            **{k: v for k, v in fields.items() if v is not None},
        )  # fmt: skip


def location_watch(
    directory: str, configuration: Configuration | None,
    overrides: Mapping[str, AgentInfo] | None = None, *, threaded: bool = True,
    plugins: Sequence[Any] = (),
) -> ConfigWatch[LocationSettings]:  # fmt: skip
    """A watch whose value is the Location's settings, read again when one of its
    configuration files, its agent folder or an agent file, or a plugin folder or file
    changes (in a worker thread when *threaded*, else on the trio thread). *plugins* are
    the program's own plugin objects, loaded first in every Location."""
    return ConfigWatch(
        lambda: _read(directory, configuration, overrides or {}, plugins), threaded=threaded
    )


def _read(
    directory: str, configuration: Configuration | None, overrides: Mapping[str, AgentInfo],
    embedded: Sequence[Any] = (),
) -> tuple[LocationSettings, list[str]]:  # fmt: skip
    folder = os.path.join(directory, _AGENT_DIR)
    looked = [folder, *_agent_files(folder)]
    error: str | None = None
    loaded = LoadedConfig.empty()
    if configuration is not None:
        try:
            loaded = load_config(directory, configuration.env)
        except ConfigError as exc:
            error = f"Configuration error: {exc}"
            _log.warning(
                "configuration not usable", extra={"location": directory, "error": str(exc)}
            )
    looked.extend(loaded.looked_at)
    data = loaded.data
    load = load_agents(
        directory, config_agents=data.get("agent"), config_permission=data.get("permission"),
        config_tools=data.get("tools"),
    )  # fmt: skip
    agents = {**load.agents, **overrides}
    for name, entry in (data.get("agent") or {}).items():
        if isinstance(entry, Mapping) and entry.get("disable") and name not in overrides:
            agents.pop(name, None)
    model, client = None, None
    if configuration is not None:
        model = configuration.pinned_model
        if model is None and loaded.config.model:
            model = ev.ModelRef.parse(loaded.config.model)
        client = configuration.client_for(data)
    small = ev.ModelRef.parse(loaded.config.small_model)
    found = discover_plugins(
        directory, env=configuration.env if configuration is not None else None,
        entries=loaded.config.plugin or [], entries_origin=loaded.origins.get("plugin"),
        embedded=embedded,
    )  # fmt: skip
    looked.extend(found.looked_at)
    settings = LocationSettings(
        loaded=loaded, agents=agents, model=model, small_model=small,
        default_agent=loaded.config.default_agent,
        llm=_Failing(error) if error is not None else client, error=error,
        diagnostics=[*map(str, loaded.diagnostics), *load.diagnostics],
        language_servers=server_specs(loaded.config.lsp),
        mcp_servers=mcp_server_specs(loaded.config, directory),
        mcp_tool_search=tool_search(loaded.config), plugins=found.candidates,
    )  # fmt: skip
    if error is not None:
        looked = [*looked, *_candidates(directory, configuration)]
    for diagnostic in settings.diagnostics:  # logged once per change of the files
        _log.warning("configuration: %s", diagnostic, extra={"location": directory})
    return settings, looked


def _candidates(directory: str, configuration: Configuration | None) -> list[str]:
    env = configuration.env if configuration is not None else {}
    return [path for _, path in config_candidates(directory, env)]


def _agent_files(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".md")]
    except OSError:
        return []


def instructions_producer(
    settings: Callable[[], LocationSettings], *, directory: str, root: str, home: str
) -> Callable[[], Any]:
    """A registry producer for ``config/instructions``: the files the current settings'
    ``instructions`` name, read in a worker thread (nothing when none are configured)."""

    async def produce() -> SystemContext:
        patterns = settings().loaded.config.instructions or []
        if not patterns:
            return config_instructions_source([])
        files = await trio.to_thread.run_sync(
            lambda: find_instruction_files(patterns, directory=directory, root=root, home=home)
        )
        return config_instructions_source(files)

    return produce


class _Failing:
    """The client of a Location whose configuration cannot be used: each turn fails with
    the configuration's error, so the prompt's failure says what to fix."""

    def __init__(self, message: str) -> None:
        self._message = message

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        yield llm.ProviderError(kind="terminal", message=self._message, code="config")


def session_model(
    info: SessionInfo, agent: AgentInfo, settings: LocationSettings, default: ev.ModelRef
) -> ev.ModelRef:
    """The model a session's turn runs on: the session's selected model, else its agent's,
    else the Location's configured ``model``, else *default* (the runtime's)."""
    if isinstance(info.model, ev.ModelRef):
        return info.model
    return ev.ModelRef.parse(agent.model) or settings.model or default
