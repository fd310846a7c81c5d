"""The Runtime root: storage, execution and the session API in one trio nursery."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from actors.api import DEFAULT_MAX_TASKS, McpSessionHost, Projects, Sessions, SessionTools
from actors.cluster import ClusterOptions, Relay, sweep
from actors.kernel import ActorDirectory, EventHub, Supervisor, SupervisorPolicy, run_root
from actors.session import (
    DEFAULT_ADMISSION_TIMEOUT,
    DEFAULT_MAX_TURNS,
    Configuration,
    ContextFactory,
    LocationLoads,
    SessionExecution,
    TitleModel,
    ToolsFactory,
    default_context,
    recover_until_written,
)
from actors.store import DEFAULT_MAX_BATCH, StorageActor, StorageMode, open_telemetry
from runtime import IdGenerator, ModelRef, StorageError
from runtime import llm as llm_package
from runtime.agents import AgentInfo
from runtime.drain import WAKE_ANY
from runtime.plugins import PluginLimits
from runtime.telemetry import recording
from runtime.titles import TitleLimits
from runtime.tools import (
    DEFAULT_CLEANUP_EVERY,
    ToolEnvironment,
    ToolRegistry,
    load_custom_tools,
    location_registry,
    run_tool_output_cleanup,
    session_tools,
)
from storage import SessionsWithPending, TelemetryOptions

if TYPE_CHECKING:
    from storage import TelemetryStore

__all__ = ["Runtime", "open_runtime"]

_log = logging.getLogger("kittiwake.runtime")
DEFAULT_MODEL: Final = ModelRef(id="default", provider_id="kittiwake")
RESTART_POLICY: Final = SupervisorPolicy(5, 10.0)
_SHUTDOWN_GRACE: Final = 10.0
_RELAY_BUFFER: Final = 4096
"""Other workers' commit notifications waiting for the relay (cluster mode)."""


class _Root(Supervisor):
    kind = "runtime"

    def __init__(
        self, storage: StorageActor, execution: SessionExecution, directory: ActorDirectory
    ) -> None:
        super().__init__("runtime", policy=RESTART_POLICY, directory=directory, label="root")
        self._storage = storage
        self._execution = execution

    async def start_initial_children(self) -> None:
        self.start_child(self._storage)
        self.start_child(self._execution.supervisor)


class Runtime:
    """A running Kittiwake: ``rt.sessions`` plus the parts an operator inspects."""

    def __init__(
        self, *, sessions: Sessions, storage: StorageActor, execution: SessionExecution,
        hub: EventHub, directory: ActorDirectory, data_dir: Path, tools: SessionTools,
        projects: Projects,
    ) -> None:  # fmt: skip
        self.sessions = sessions
        self.projects = projects
        """The projects sessions belong to, one per repository or directory."""
        self.tools = tools
        """Todos, questions and subagent tasks of every session."""
        self.storage = storage
        self.execution = execution
        self.hub = hub
        self.directory = directory
        self.data_dir = data_dir
        self.telemetry: TelemetryStore | None = None
        """The span tables, when the runtime records telemetry."""


def default_tools(env: ToolEnvironment) -> ToolRegistry:
    """The built-in tools of a Location, then its ``.kittiwake/tool/*.py`` tools."""
    registry = location_registry(env)
    custom = load_custom_tools(env.directory)
    if custom.tools:
        registry.contribute(custom.tools)
    return registry


@asynccontextmanager
async def open_runtime(
    *, data_dir: Path | str, llm: llm_package.LLMClient | None = None,
    tools: ToolsFactory | None = None, context: ContextFactory | None = None, agents: Mapping[str, AgentInfo] | None = None,
    default_model: ModelRef = DEFAULT_MODEL, storage_mode: StorageMode = "threaded",
    max_turns: int = DEFAULT_MAX_TURNS, idle_timeout: float = 300.0, max_active: int = 256,
    now_ms: Callable[[], int] | None = None, ids: IdGenerator | None = None,
    store_options: dict[str, Any] | None = None, recover: bool = True,
    tool_output_cleanup_every: float | None = DEFAULT_CLEANUP_EVERY,
    storage_max_batch: int = DEFAULT_MAX_BATCH,
    title_model: TitleModel | None = None, title_limits: TitleLimits | None = None,
    configuration: Configuration | None = None, location_loads: LocationLoads = "threaded",
    telemetry: TelemetryOptions | None = None,
    max_tasks: int = DEFAULT_MAX_TASKS, store_url: str | None = None,
    telemetry_dir: Path | str | None = None, cluster: ClusterOptions | None = None,
    admission_timeout: float = DEFAULT_ADMISSION_TIMEOUT, plugins: Sequence[Any] = (),
    plugin_limits: PluginLimits | None = None,
) -> AsyncIterator[Runtime]:  # fmt: skip
    """Start a runtime in this trio program; usable as ``async with``.

    Entering opens (and if needed rebuilds) the store, closes the provider turns a crash
    cut short (such sessions then need an explicit resume: ``sessions.needs_resume``) and
    wakes every session with unpromoted inbox rows. Exiting first interrupts active drains (their tools settle
    as interrupted, durably, within a bounded grace), then closes the store after its
    last batch.

    Args:
        data_dir: where ``kittiwake.duckdb``, the journal and tool output live.
        llm: the ``LLMClient`` provider turns use; without one, turns fail clearly.
        storage_mode: ``"threaded"`` (pykka thread) or ``"inline"`` (simulation).
        max_turns: provider turns per drain (agents may override with ``steps``).
        idle_timeout: seconds an idle SessionActor stays active before passivation.
        max_active: active SessionActors kept; least recently used idle ones beyond it
            are passivated (their state is all in storage).
        tool_output_cleanup_every: seconds between sweeps removing Managed Tool Output
            Files older than 7 days; ``None`` runs no sweeper (simulation).
        storage_max_batch: most writes in one group commit (1: a transaction per write).
        title_model: which model writes a new session's title after its first prompt,
            given the model of the session's first turn (e.g. the provider's small
            model); ``None`` (the default) writes no titles.
        title_limits: bounds of each title request (prompt characters, output tokens,
            timeout).
        configuration: how each Location reads its ``kittiwake.json`` files (agents,
            permission rules, default model, providers, instructions), re-read at each
            provider turn after a change; ``None`` reads no configuration.
        location_loads: where a Location's blocking reads run (configuration and agent
            files, custom tool imports): ``"threaded"`` in a worker thread, ``"inline"``
            on the trio thread, for simulations under trio's autojump clock (which runs
            ahead while a worker thread works).
        telemetry: record spans of admissions, drains, provider turns, tools, storage
            batches and requests into ``telemetry.duckdb`` beside the store (and to an
            OTLP endpoint if it names one); ``None`` (the default) records none.
            ``rt.telemetry`` then answers span and summary queries.
        telemetry_dir: where ``telemetry.duckdb`` goes instead of *data_dir* (one per
            process: each ``--workers`` worker has its own).
        cluster: with *store_url*, run as one worker among others on that database
            (``docs/cluster.md``): drains only under the session's lease, other workers'
            commits relayed here, sessions whose lease expired with work left recovered
            by a periodic sweep instead of at start-up.
        max_tasks: subagent tasks (``task`` tool calls) one session runs at once; further
            calls wait for a slot.
        store_url: a PostgreSQL URL (``postgresql://...``): the store is there instead of
            ``kittiwake.duckdb`` (with *cluster*, one worker of many; ``docs/cluster.md``).
        admission_timeout: seconds a prompt that opens an idle session's activity in its
            own batch waits for that batch (cancelled or not) before answering that the
            admission is not known (``StorageError``; the store restarting or stuck).
        plugins: the program's own plugin objects (modules, objects or factories with
            ``runtime.plugins`` hooks), loaded first in every Location, before those its
            configuration and ``.kittiwake/plugins/`` name (``docs/plugins.md``).
        plugin_limits: the hook timeout and other bounds of every Location's plugins.
    """
    options = dict(locals())
    if telemetry is None:
        async with _open_runtime(**options) as rt:
            yield rt
        return
    store, processor = await open_telemetry(Path(telemetry_dir or data_dir), telemetry)
    try:
        with recording(processor, record_text=telemetry.record_text):
            async with _open_runtime(**options) as rt:
                rt.telemetry = store
                yield rt
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(processor.shutdown)


@asynccontextmanager
async def _open_runtime(
    *, data_dir: Path | str, llm: llm_package.LLMClient | None, tools: ToolsFactory | None,
    context: ContextFactory | None, agents: Mapping[str, AgentInfo] | None,
    default_model: ModelRef, storage_mode: StorageMode, max_turns: int, idle_timeout: float,
    max_active: int, now_ms: Callable[[], int] | None, ids: IdGenerator | None,
    store_options: dict[str, Any] | None, recover: bool,
    tool_output_cleanup_every: float | None, storage_max_batch: int,
    title_model: TitleModel | None, title_limits: TitleLimits | None,
    configuration: Configuration | None, location_loads: LocationLoads, max_tasks: int,
    store_url: str | None, cluster: ClusterOptions | None, admission_timeout: float,
    plugins: Sequence[Any], plugin_limits: PluginLimits | None, **_: Any,
) -> AsyncIterator[Runtime]:  # fmt: skip
    """``open_runtime`` without telemetry's set-up (see there)."""
    data = _prepare(Path(data_dir))
    clock = now_ms or (lambda: time.time_ns() // 1_000_000)
    id_gen = ids or IdGenerator()
    hub = EventHub()
    directory = ActorDirectory()
    if cluster is not None:
        store_options = {**(store_options or {}), "owner": cluster.owner}
    storage = StorageActor(
        data, hub=hub, mode=storage_mode, store_options=store_options,
        max_batch=storage_max_batch, store_url=store_url,
    )  # fmt: skip
    execution = SessionExecution(
        storage=storage, hub=hub, llm_client=llm or _NoProvider(), tools=tools or default_tools,
        context=context or default_context,
        agents=agents, default_model=default_model, data_dir=data,
        max_turns=max_turns, idle_timeout=idle_timeout, max_active=max_active, now_ms=clock,
        ids=id_gen,
        directory=directory, policy=RESTART_POLICY,
        title_model=title_model, title_limits=title_limits, configuration=configuration,
        location_loads=location_loads, cluster=cluster, plugins=plugins,
        plugin_limits=plugin_limits,
    )  # fmt: skip
    projects = Projects(storage=storage, now_ms=clock)
    sessions = Sessions(
        storage=storage, hub=hub, execution=execution, ids=id_gen, now_ms=clock,
        projects=projects, cluster=cluster, admission_timeout=admission_timeout,
    )  # fmt: skip
    tools_api = SessionTools(
        storage=storage, execution=execution, now_ms=clock, max_tasks=max_tasks
    )
    tools_api.bind(sessions)
    execution.location_tools = partial(session_tools, tools_api)
    execution.mcp_host = McpSessionHost(
        storage=storage, execution=execution, questions=tools_api.questions, now_ms=clock
    )
    root = _Root(storage, execution, directory)
    async with trio.open_nursery() as nursery:
        await nursery.start(run_root, root)
        if tool_output_cleanup_every is not None:
            output = str(data / "tool-output")
            nursery.start_soon(
                partial(run_tool_output_cleanup, output, every=tool_output_cleanup_every)
            )
        await _wait_running(storage, execution)
        rt = Runtime(
            sessions=sessions, storage=storage, execution=execution, hub=hub,
            directory=directory, data_dir=data, tools=tools_api, projects=projects,
        )  # fmt: skip
        execution.plugins.client = rt
        if cluster is not None and store_url is not None:  # recovery under each lease
            from storage import listen  # psycopg loads only for a PostgreSQL store

            send, receive = trio.open_memory_channel[tuple[str, int, int]](_RELAY_BUFFER)
            await nursery.start(listen, store_url, cluster.owner, send)
            relay = Relay(storage, hub, execution, questions=tools_api.questions)
            nursery.start_soon(relay.run, receive)
            nursery.start_soon(sweep, storage, execution, cluster)
        elif recover:
            await _recover_and_wake(rt, clock)
        try:
            yield rt
        finally:
            with trio.move_on_after(_SHUTDOWN_GRACE, shield=True):
                await execution.shutdown()
            nursery.cancel_scope.cancel()


def _prepare(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    return data


async def _wait_running(storage: StorageActor, execution: SessionExecution) -> None:
    await storage.ready.wait()
    await execution.ready.wait()


async def _recover_and_wake(rt: Runtime, now_ms: Callable[[], int]) -> None:
    """Close what a crash cut short in every session that shows it (each one then needs a
    resume), then wake every session with unpromoted inbox rows.

    A session whose recovery write fails (the store failed a commit and restarts) is tried
    again on the restarted store (``recover_until_written``); one that still fails is
    woken too, so its actor recovers it before the drain the wake starts, without waiting
    for a client. The runtime starts either way.
    """
    needing = await rt.sessions.needs_resume()
    failed: list[str] = []
    for session_id in needing:  # recovered, they stay marked: the same list after
        try:
            await recover_until_written(rt.storage, session_id, now_ms)
        except StorageError as exc:
            failed.append(session_id)
            _log.error(
                "start-up recovery failed; the session's actor recovers it",
                extra={"session": session_id},
                exc_info=exc,
            )
    pending = await rt.storage.read(SessionsWithPending())
    for session_id in [*pending, *(s for s in failed if s not in pending)]:
        await rt.execution.wake(session_id, WAKE_ANY)
    if needing:
        _log.warning("sessions need an explicit resume", extra={"sessions": needing})


class _NoProvider:
    """The LLMClient used when none is configured: every turn fails with a clear message."""

    async def stream(self, request: llm_package.LLMRequest) -> AsyncIterator[llm_package.LLMEvent]:
        message = (
            "No LLM provider is configured: set a provider API key (see `kittiwake serve` output)"
        )
        yield llm_package.ProviderError(kind="auth", message=message)
