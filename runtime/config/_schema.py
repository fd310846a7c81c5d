"""The keys of OpenCode's ``opencode.json`` that Kittiwake reads, as typed Structs.

Every field defaults to "unset" (``None``) so that a source document converts on its
own and merging stays a matter of dictionaries. Free-form places (provider and model
``options``, an agent's extra keys) are kept as they are written.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import Meta

__all__ = [
    "AgentConfig",
    "CompactionConfig",
    "Config",
    "ExperimentalConfig",
    "LanguageServersConfig",
    "LspServerConfig",
    "McpOAuthConfig",
    "McpServerConfig",
    "McpToolSearchConfig",
    "ModelConfig",
    "ModelCostConfig",
    "ModelLimitConfig",
    "PermissionActionConfig",
    "PermissionConfig",
    "ProviderConfig",
    "ProviderOptions",
    "ServerConfig",
    "TelemetryConfig",
    "TelemetryOtlpConfig",
    "ToolOutputConfig",
    "WebFetchConfig",
    "WebSearchConfig",
]

PermissionActionConfig: TypeAlias = Literal["ask", "allow", "deny"]
PermissionRuleConfig: TypeAlias = PermissionActionConfig | dict[str, PermissionActionConfig]
PermissionConfig: TypeAlias = PermissionActionConfig | dict[str, PermissionRuleConfig]
"""``"allow"`` for everything, or per permission an action or ``{pattern: action}``."""

_Positive = Annotated[int, Meta(gt=0)]
_Timeout: TypeAlias = _Positive | Literal[False]
_Seconds = Annotated[float, Meta(gt=0)]


class _Section(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A configuration object: every key optional."""


class ServerConfig(_Section, frozen=True):
    """``server``: where ``kittiwake serve`` listens when no flag says otherwise."""

    port: Annotated[int, Meta(gt=0, le=65535)] | None = None
    hostname: str | None = None
    mdns: bool | None = None
    mdnsDomain: str | None = None
    cors: list[str] | None = None


class ModelLimitConfig(_Section, frozen=True):
    context: int
    output: int
    input: int | None = None


class ModelCostOver(_Section, frozen=True):
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


class ModelCostConfig(_Section, frozen=True):
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    context_over_200k: ModelCostOver | None = None


class ModelModalities(_Section, frozen=True):
    input: list[Literal["text", "audio", "image", "video", "pdf"]] | None = None
    output: list[Literal["text", "audio", "image", "video", "pdf"]] | None = None


class ModelProviderOverride(_Section, frozen=True):
    npm: str | None = None
    api: str | None = None


class InterleavedField(_Section, frozen=True):
    field: str


class ModelConfig(_Section, frozen=True):
    """One model of a configured provider (``provider.<id>.models.<id>``)."""

    id: str | None = None
    name: str | None = None
    family: str | None = None
    release_date: str | None = None
    attachment: bool | None = None
    reasoning: bool | None = None
    temperature: bool | None = None
    tool_call: bool | None = None
    interleaved: bool | str | InterleavedField | None = None
    cost: ModelCostConfig | None = None
    limit: ModelLimitConfig | None = None
    modalities: ModelModalities | None = None
    experimental: bool | None = None
    status: Literal["alpha", "beta", "deprecated", "active"] | None = None
    provider: ModelProviderOverride | None = None
    options: dict[str, Any] | None = None
    headers: dict[str, str] | None = None
    variants: dict[str, dict[str, Any]] | None = None


class ProviderOptions(_Section, frozen=True):
    """``provider.<id>.options``: the endpoint, key, headers and timeouts; other keys are
    kept and passed on as provider options."""

    apiKey: str | None = None
    baseURL: str | None = None
    enterpriseUrl: str | None = None
    setCacheKey: bool | None = None
    timeout: _Timeout | None = None
    headerTimeout: _Timeout | None = None
    chunkTimeout: _Timeout | None = None
    headers: dict[str, str] | None = None


class ProviderConfig(_Section, frozen=True):
    """``provider.<id>``: a models.dev provider's overrides, or a provider of its own."""

    api: str | None = None
    name: str | None = None
    env: list[str] | None = None
    id: str | None = None
    npm: str | None = None
    whitelist: list[str] | None = None
    blacklist: list[str] | None = None
    options: ProviderOptions | None = None
    models: dict[str, ModelConfig] | None = None


class AgentConfig(_Section, frozen=True):
    """``agent.<name>``: a new agent, or overrides of a built-in one."""

    model: str | None = None
    variant: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    prompt: str | None = None
    tools: dict[str, bool] | None = None
    disable: bool | None = None
    description: str | None = None
    mode: Literal["subagent", "primary", "all"] | None = None
    hidden: bool | None = None
    options: dict[str, Any] | None = None
    color: str | None = None
    steps: _Positive | None = None
    maxSteps: _Positive | None = None
    permission: PermissionConfig | None = None


class CompactionConfig(_Section, frozen=True):
    """``compaction``: automatic compaction (``auto``), old tool-result pruning
    (``prune``), the headroom kept below the model's window (``buffer``, or OpenCode's
    ``reserved``), the recent context's budget (``preserve_recent_tokens``) and the most
    turns it holds (``tail_turns``: the newest turns, within that budget; 0 keeps none;
    unset bounds it by the budget alone)."""

    auto: bool | None = None
    prune: bool | None = None
    tail_turns: Annotated[int, Meta(ge=0)] | None = None
    preserve_recent_tokens: Annotated[int, Meta(ge=0)] | None = None
    reserved: Annotated[int, Meta(ge=0)] | None = None
    buffer: Annotated[int, Meta(ge=0)] | None = None


class ToolOutputConfig(_Section, frozen=True):
    """``tool_output``: the bound on one tool result's model-visible output."""

    max_lines: _Positive | None = None
    max_bytes: _Positive | None = None


class TelemetryOtlpConfig(_Section, frozen=True):
    """``telemetry.otlp``: an OTLP/HTTP collector that also gets every span."""

    endpoint: str | None = None
    headers: dict[str, str] | None = None


class TelemetryConfig(_Section, frozen=True):
    """``telemetry``: spans in ``telemetry.duckdb`` (Kittiwake's own key)."""

    enabled: bool | None = None
    retention_days: Annotated[float, Meta(gt=0)] | None = None
    max_mb: _Positive | None = None
    record_text: bool | None = None
    sample: Annotated[float, Meta(ge=0, le=1)] | None = None
    otlp: TelemetryOtlpConfig | None = None


class McpOAuthConfig(_Section, frozen=True):
    """``mcp.<name>.oauth``: how a remote server's OAuth client registers and signs in."""

    clientId: str | None = None
    clientSecret: str | None = None
    scope: str | None = None
    callbackPort: Annotated[int, Meta(ge=1, le=65535)] | None = None
    redirectUri: str | None = None


class McpServerConfig(_Section, frozen=True):
    """``mcp.<name>``: a local server (``type: "local"``, ``command``, ``environment``,
    ``cwd`` relative to the project), a remote one (``type: "remote"``, ``url``,
    ``headers``, ``oauth``), or only ``{"enabled": false}``; ``timeout`` is a call's, in
    milliseconds (``docs/mcp.md``)."""

    type: Literal["local", "remote"] | None = None
    command: list[str] | None = None
    environment: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] | None = None
    oauth: McpOAuthConfig | bool | None = None
    enabled: bool | None = None
    timeout: _Positive | None = None


class McpToolSearchConfig(_Section, frozen=True):
    """``experimental.mcp_tool_search`` (Kittiwake's own key): past ``threshold`` MCP tools
    in a Location the model gets one ``mcp_search`` tool instead of their definitions,
    whose answer holds at most ``max_results`` tools (``docs/mcp.md``)."""

    threshold: Annotated[int, Meta(ge=0)] | None = None
    max_results: Annotated[int, Meta(ge=1, le=50)] | None = None


class ExperimentalConfig(_Section, frozen=True):
    """``experimental``: of OpenCode's keys, ``mcp_timeout`` (milliseconds: the call
    timeout of MCP servers that set none); and Kittiwake's ``mcp_tool_search`` (``false``
    switches tool search off)."""

    mcp_timeout: _Positive | None = None
    mcp_tool_search: McpToolSearchConfig | bool | None = None


class WebFetchConfig(_Section, frozen=True):
    """``webfetch`` (Kittiwake's own key): what the ``webfetch`` tool may reach and how much
    it reads. Link-local and cloud-metadata addresses are always refused."""

    allow_loopback: bool | None = None
    allow_private: bool | None = None
    max_bytes: _Positive | None = None
    max_redirects: Annotated[int, Meta(ge=0, le=20)] | None = None
    timeout: _Seconds | None = None
    max_timeout: _Seconds | None = None


class WebSearchConfig(_Section, frozen=True):
    """``websearch`` (Kittiwake's own key): the search backend; without one the
    ``websearch`` tool is not offered."""

    backend: Literal["exa", "brave", "tavily", "searxng"]
    url: str | None = None
    apiKey: str | None = None
    max_results: Annotated[int, Meta(ge=1, le=50)] | None = None
    timeout: _Seconds | None = None


class LspServerConfig(_Section, frozen=True):
    """``lsp.<name>``: a language server (``command`` for the file ``extensions``), or a
    built-in one switched off (``{"disabled": true}``)."""

    command: list[str] | None = None
    extensions: list[str] | None = None
    disabled: bool | None = None
    env: dict[str, str] | None = None
    initialization: dict[str, Any] | None = None


class LanguageServersConfig(_Section, frozen=True):
    """``language_servers`` (Kittiwake's own key): the timeouts of language servers."""

    idle_timeout: _Seconds | None = None
    start_timeout: _Seconds | None = None
    request_timeout: _Seconds | None = None
    diagnostics_timeout: _Seconds | None = None
    diagnostics_settle: _Seconds | None = None
    max_restarts: Annotated[int, Meta(ge=0)] | None = None


class SlackConfig(_Section, frozen=True):
    """``slack`` (Kittiwake's own key): ``kittiwake slack``'s tokens (and ``serve --slack``'s
    signing secret), where it reaches Slack's Web API, and who may use it (an empty or missing list admits everyone of that kind)."""

    botToken: str | None = None
    appToken: str | None = None
    apiUrl: str | None = None
    directory: str | None = None
    allowedUsers: list[str] | None = None
    allowedChannels: list[str] | None = None
    allowedTeams: list[str] | None = None
    answerers: list[str] | None = None
    updateInterval: Annotated[float, Meta(gt=0)] | None = None
    pingInterval: Annotated[float, Meta(gt=0)] | None = None
    signingSecret: str | None = None


class Config(_Section, frozen=True, rename={"schema": "$schema"}):
    """The configuration keys Kittiwake reads (OpenCode's ``Config`` schema, in part)."""

    schema: str | None = None
    model: str | None = None
    small_model: str | None = None
    default_agent: str | None = None
    username: str | None = None
    share: Literal["manual", "auto", "disabled"] | None = None
    server: ServerConfig | None = None
    provider: dict[str, ProviderConfig] | None = None
    enabled_providers: list[str] | None = None
    disabled_providers: list[str] | None = None
    agent: dict[str, AgentConfig] | None = None
    permission: PermissionConfig | None = None
    instructions: list[str] | None = None
    compaction: CompactionConfig | None = None
    tool_output: ToolOutputConfig | None = None
    mcp: dict[str, McpServerConfig] | None = None
    tools: dict[str, bool] | None = None
    experimental: ExperimentalConfig | None = None
    telemetry: TelemetryConfig | None = None
    webfetch: WebFetchConfig | None = None
    websearch: WebSearchConfig | None = None
    lsp: bool | dict[str, LspServerConfig] | None = None
    language_servers: LanguageServersConfig | None = None
    slack: SlackConfig | None = None
    plugin: list[str | tuple[str, dict[str, Any]]] | None = None
    """Plugins: a package, a module, an entry point or a file, alone or with its options."""


OPEN_SECTIONS: dict[type[_Section], bool] = {ProviderOptions: False, AgentConfig: True}
"""Sections whose other keys are kept (value: whether they are still reported)."""
