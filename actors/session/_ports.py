"""SessionPorts: what a SessionActor uses of the runtime around it, and nothing more.

``SessionExecution`` builds one and hands it to every SessionActor it starts; the actor
does not see the router (its sessions, activation, passivation, deletion).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from msgspec import UnsetType

from actors.session._titles import TitleModel
from runtime import IdGenerator, SessionInfo, llm
from runtime import events as ev
from runtime.agents import AgentInfo
from runtime.context import SystemContext
from runtime.plugins import LocationPlugins
from runtime.titles import TitleLimits
from runtime.tools import ToolRegistry

if TYPE_CHECKING:
    from actors.cluster import ClusterOptions
    from actors.kernel import EventHub
    from actors.session._config import LocationSettings
    from actors.session._permissions import DurablePermissions
    from actors.store import StorageActor

__all__ = ["SessionLocation", "SessionPorts"]


class SessionLocation(Protocol):
    """What a session's drain uses of its Location (working directory)."""

    @property
    def settings(self) -> LocationSettings: ...
    @property
    def registry(self) -> ToolRegistry: ...
    @property
    def plugins(self) -> LocationPlugins: ...
    def agent(self, name: str | None) -> AgentInfo: ...
    def tools_for(
        self, agent: AgentInfo, found: list[str] | UnsetType, session_id: str | None = None
    ) -> list[llm.ToolDefinition]: ...
    async def observe_context(self) -> SystemContext: ...


@dataclass(frozen=True, slots=True)
class SessionPorts:
    """A SessionActor's collaborators and limits.

    Attributes:
        storage: the storage port every durable read and write goes through.
        hub: where turn events are published.
        permissions: durable permission approvals for tool calls.
        session_info: the session's info, remembered when its actor was activated.
        refresh_info: remember a session's info read again (a no-op when its actor is
            not active).
        location_for: the Location of a working directory, opened already by
            *location* (``LookupError`` otherwise; it reads nothing).
        location: the Location of a working directory, opened off the trio thread at
            first use.
        current_location: the Location of a working directory, opened off the trio
            thread at first use and with its configuration read again if it changed.
        ready_location: *current_location* once its plugins are loaded (raises
            ``PluginsNotReady`` when a required one failed): where a drain starts.
        on_idle: told a session's drain chain ended (its plugins hear ``session_idle``).
        client_for: the provider client turns in a Location stream from.
        now_ms / ids: the clock and the id generator.
        default_model: the model when neither the session nor its Location names one.
        max_turns: the provider-turn allowance of one drain.
        title_model / title_limits: the title request's model (``None``: no titles)
            and its bounds.
        cluster: this worker's identity and lease timings in cluster mode (drains run
            under the session's lease, ``actors.cluster._cluster``); ``None`` in one process.
    """

    storage: StorageActor
    hub: EventHub
    permissions: DurablePermissions
    session_info: Callable[[str], SessionInfo]
    refresh_info: Callable[[SessionInfo], None]
    location_for: Callable[[str], SessionLocation]
    location: Callable[[str], Awaitable[SessionLocation]]
    current_location: Callable[[str], Awaitable[SessionLocation]]
    ready_location: Callable[[str], Awaitable[SessionLocation]]
    on_idle: Callable[[str], None]
    client_for: Callable[[SessionLocation], llm.LLMClient]
    now_ms: Callable[[], int]
    ids: IdGenerator
    default_model: ev.ModelRef
    max_turns: int
    title_model: TitleModel | None
    title_limits: TitleLimits
    cluster: ClusterOptions | None = None
