"""SessionExecution: the process-global router from session id to SessionActor.

It supervises SessionActors (activated lazily on first use, passivated after
``idle_timeout`` seconds without a drain) and LocationStates (one per working
directory, holding the Location's tool registry: opened by its base, ``Locations`` in
``actors/session/_locations.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, NoReturn

import trio

from actors.cluster import ClusterOptions
from actors.kernel import (
    ActorDirectory,
    ActorNotFound,
    ActorStopped,
    EventHub,
    Reply,
    SupervisorPolicy,
    call,
    held,
)
from actors.session._config import (
    Configuration,
)
from actors.session._context import ContextFactory
from actors.session._created import CreatedInfos
from actors.session._location import LocationState
from actors.session._locations import (
    BlockingRunner,
    LocationLoads,
    Locations,
    LocationTools,
    ToolsFactory,
)
from actors.session._permissions import DurablePermissions
from actors.session._plugins import PluginSetup
from actors.session._ports import SessionPorts
from actors.session._session import SessionActor
from actors.session._session_messages import CompactSoon, Interrupt, Run, Wake
from actors.session._supervision import ExecutionSupervisor, run_inline
from actors.session._titles import TitleModel
from actors.store import StorageActor
from runtime import IdGenerator, SessionInfo, SessionNotFoundError, llm
from runtime import events as ev
from runtime.agents import AgentInfo
from runtime.drain import WAKE_ANY
from runtime.mcp import McpHost, McpOAuth
from runtime.plugins import PluginLimits
from runtime.titles import TitleLimits
from storage import GetSession

__all__ = [
    "LocationLoads",
    "LocationState",
    "LocationTools",
    "SessionExecution",
    "ToolsFactory",
]

DEFAULT_IDLE_TIMEOUT: Final = 300.0
DEFAULT_MAX_ACTIVE: Final = 256
_PASSIVATION_RETRIES: Final = 3
_SWEEP_EVERY: Final = 30.0


class SessionExecution(Locations):
    """Routes wake / run / interrupt / wait_idle by session id; see the module docstring.

    Args:
        storage: the StorageActor.
        hub: the event hub deltas go to.
        llm_client: the ``LLMClient`` provider turns stream from.
        tools: builds a Location's tool registry from its environment.
        context: builds a Location's System Context Registry from its directory.
        agents: agents by name that override each Location's own (built-ins, then
            configuration, then ``.kittiwake/agent/*.md``); ``None`` keeps the Location's.
        configuration: how Locations read ``kittiwake.json`` files; ``None`` reads none.
        default_model: the model of sessions that selected none.
        data_dir: where managed tool output goes.
        max_turns: provider turns per drain before failing when work remains.
        idle_timeout: seconds an idle SessionActor stays active.
        max_active: active SessionActors kept; past it, the least recently used idle
            ones are passivated as others activate.
        now_ms: the clock stamped on events.
        title_model: which model writes a new session's title, given the model of its
            first turn; ``None`` writes no titles.
        title_limits: bounds of each title request.
        location_loads: where a Location's blocking reads run (its files, its custom
            tools' imports): ``"threaded"`` in a worker thread, ``"inline"`` on the trio
            thread (simulations under an autojump clock, which must not see threads).
        cluster: cluster mode (a worker among others on one database): drains run under
            the session's lease (``actors.cluster._cluster``); ``None`` in one process.
        plugins: plugin objects of the embedding program, loaded first in every Location.
        plugin_limits: timeouts and queue bounds of every Location's plugins.
    """

    def __init__(
        self, *, storage: StorageActor, hub: EventHub, llm_client: llm.LLMClient,
        tools: ToolsFactory, context: ContextFactory, agents: Mapping[str, AgentInfo] | None, default_model: ev.ModelRef,
        data_dir: Path, max_turns: int, idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_active: int = DEFAULT_MAX_ACTIVE,
        now_ms: Callable[[], int], ids: IdGenerator, directory: ActorDirectory,
        policy: SupervisorPolicy,
        title_model: TitleModel | None = None, title_limits: TitleLimits | None = None,
        configuration: Configuration | None = None, location_loads: LocationLoads = "threaded",
        cluster: ClusterOptions | None = None, plugins: Sequence[Any] = (),
        plugin_limits: PluginLimits | None = None,
    ) -> None:  # fmt: skip
        self.supervisor = ExecutionSupervisor(self, policy=policy, directory=directory)
        self.title_model = title_model
        self.title_limits = title_limits or TitleLimits()
        self.configuration = configuration
        self.storage = storage
        self.hub = hub
        self.llm = llm_client
        self.agents = agents
        self.default_model = default_model
        self.max_turns = max_turns
        self.now_ms = now_ms
        self.ids = ids
        self._tools = tools
        self._context = context
        self._data_dir = data_dir
        self.mcp_oauth = McpOAuth(str(data_dir))
        """Sign-ins to remote MCP servers (``mcp-auth.json``), shared by every Location."""
        self._idle_timeout = idle_timeout
        self._max_active = max_active
        self._sessions: dict[str, SessionActor] = {}
        self._locations: dict[str, LocationState] = {}
        self._opening: dict[str, trio.Event] = {}
        """Locations being opened, set when their opening ended (opened or not)."""
        self._loads = location_loads
        self._run_blocking: BlockingRunner = (
            trio.to_thread.run_sync if location_loads == "threaded" else run_inline
        )
        self.run_blocking = self._run_blocking
        """Runs a blocking read as a Location's files are read (a worker thread, or inline)."""
        self._infos: dict[str, SessionInfo] = {}
        self._created = CreatedInfos()
        """Sessions created here and unchanged since (one process only: in a cluster,
        another worker may change them unseen)."""
        if cluster is None:
            hub.add_observer(self._created.observe)
        self._retiring: dict[str, trio.Lock] = {}
        """Sessions held inactive for their deletion; one deletion of a session at a time."""
        self._retirements: dict[str, int] = {}
        """How many times each session was retired, so that an activation whose read of
        the session raced a deletion does not start an actor for it."""
        self._shedding = False
        self.plugins = PluginSetup(
            hub, plugins, plugin_limits, infos=self._infos, locations=self._locations,
            credentials=llm.CredentialStore(data_dir).get,
        )  # fmt: skip
        self.ready = trio.Event()
        self.permissions = DurablePermissions(storage, now_ms)
        self.closing = False
        """The runtime is closing: drains are being stopped for it, not interrupted."""
        self.location_tools: LocationTools | None = None
        """Tools every Location gets as a contribution of their own when it opens."""
        self.mcp_host: McpHost | None = None
        """What every Location's MCP servers record durably and ask of sessions."""
        self.ports = SessionPorts(
            storage=storage, hub=hub, permissions=self.permissions, session_info=self.session_info,
            refresh_info=self.refresh_info,
            location_for=self.location_for, location=self.location,
            current_location=self.current_location, ready_location=self.ready_location,
            on_idle=self.plugins.idle,
            client_for=self.client_for, now_ms=now_ms, ids=ids,
            default_model=default_model, max_turns=max_turns, title_model=title_model,
            title_limits=self.title_limits, cluster=cluster,
        )  # fmt: skip
        """What each SessionActor is given (it does not see this router)."""

    def _reset(self) -> None:
        self._sessions.clear()
        self._locations.clear()

    # -- entry points -------------------------------------------------------------------

    async def wake(self, session_id: str, seq: int) -> None:
        """Report durable inbox work at *seq*; coalesces, never waits for the drain."""
        actor = await self._activate(session_id)
        if actor is not None:
            actor.note_admission()
            await actor.mailbox.send(Wake(seq))

    def reserve_opening(self, session_id: str) -> tuple[SessionActor, tuple[int, int]] | None:
        """The active, idle, ready SessionActor of *session_id* with its opening reserved
        (see :meth:`SessionActor.reserve_opening`), or None."""
        actor = self._sessions.get(session_id)
        base = None if actor is None else actor.reserve_opening()
        return None if actor is None or base is None else (actor, base)

    async def run(self, session_id: str) -> None:
        """Explicit resume: join or start a drain with at least one provider attempt;
        returns when that drain has ended (cancelling the wait leaves it running)."""
        for _ in range(_PASSIVATION_RETRIES):
            actor = await self._activate(session_id)
            if actor is None or await self._ask(actor, lambda reply: Run(reply)):
                return

    async def start_run(self, session_id: str) -> None:
        """Explicit resume without waiting: the session's actor has the run in its mailbox
        when this returns (a later ``wait_idle`` waits for its drain). A no-op for an
        unknown session. Cancellation before the hand-over starts nothing."""
        actor = await self._activate(session_id)
        if actor is not None:
            reply: Reply[None] = Reply()  # answered when the drain ends; nobody waits
            await actor.mailbox.send(Run(reply))

    async def compact(self, session_id: str) -> None:
        """Have the session compact at its next safe boundary (now, when idle); returns
        once its actor has the request. A no-op for an unknown session."""
        for _ in range(_PASSIVATION_RETRIES):
            actor = await self._activate(session_id)
            if actor is None or await self._ask(actor, lambda reply: CompactSoon(reply)):
                return

    async def interrupt(self, session_id: str, seq: int | None = None) -> None:
        """Stop the active drain and wait for its cleanup; a no-op when idle or unknown."""
        barrier = seq if seq is not None else 1 << 62
        await self._ask_active(session_id, lambda reply: Interrupt(barrier, reply))

    async def wait_idle(self, session_id: str) -> None:
        """Wait until the session's actor has handled every message sent to it before
        this call and has no drain running or pending, so a prompt admitted before the
        wait is waited for; an inactive session is idle at once.

        One path: the wait registers with the actor directly against its mailbox's
        sequence numbers (``SessionActor.idle_waiter``), waking none of its tasks. An
        actor passivated meanwhile was idle, unless work reached it as it stopped: then
        it is started again and the wait goes on with it. Cancellation abandons the
        wait.

        Raises:
            SessionNotFoundError: the session is being deleted.
            ActorCrashed: its actor crashed meanwhile.
            ActorStopped: its actor stopped for another reason (the runtime is closing).
        """
        actor = self._sessions.get(session_id)
        if actor is None:
            return
        after = actor.mailbox.sent
        while True:
            if actor.state in ("stopped", "dead"):
                self._raise_stopped(actor, ActorStopped(actor.id, actor.state))
            reply = actor.idle_waiter(after)
            if reply is None:
                return
            try:
                with held(actor, reply):
                    await reply.wait()
                return
            except ActorStopped as stopped:
                if stopped.state != "passivated":
                    self._raise_stopped(actor, stopped)
            if self._sessions.get(session_id) is not actor:
                return  # passivated for good: it was idle, nothing queued

    def settled_since(self, session_id: str, moment: float) -> bool:
        """Cluster mode: whether the session's actor is idle here with its lease parked by
        a write sent after *moment* (``SessionActor.settled_since``): nothing admitted
        before *moment* is pending or driven elsewhere."""
        actor = self._sessions.get(session_id)
        return actor is not None and actor.settled_since(moment)

    async def _ask_active(self, session_id: str, make: Callable[[Reply[None]], Any]) -> None:
        """Call the session's actor if it is active; a passivated one was idle, but one
        restarted because work reached it as it stopped is asked again."""
        for _ in range(_PASSIVATION_RETRIES):
            actor = self._sessions.get(session_id)
            if actor is None or await self._ask(actor, make):
                return

    async def _ask(self, actor: SessionActor, make: Callable[[Reply[None]], Any]) -> bool:
        """Call *actor*; False when it was passivated meanwhile (so it was idle).

        Raises:
            SessionNotFoundError: the session is being deleted.
            ActorStopped: the actor stopped for another reason (the runtime is closing).
        """
        try:
            await call(actor, make)
        except ActorStopped as stopped:
            if stopped.state != "passivated":
                self._raise_stopped(actor, stopped)
            return False
        return True

    def _raise_stopped(self, actor: SessionActor, stopped: ActorStopped) -> NoReturn:
        """Re-raise *stopped*, as SessionNotFoundError when the actor was stopped for its
        session's deletion (however long ago the caller learns of it)."""
        if actor.retired:
            raise SessionNotFoundError(actor.id) from None
        raise stopped

    @asynccontextmanager
    async def retiring(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session inactive for the block (its deletion): the actor is stopped,
        an active drain cancelled and settled first, and nothing activates the session
        until the block ends (wakes and runs are ignored, as for an unknown session).

        Blocks for the same session run one at a time: a second deletion waits until the
        first has stopped the actor and written, so it never deletes under a drain that is
        still settling. Cancellation while the actor stops waits for it to stop; the
        session is activated again on its next use if it still exists.
        """
        lock = self._retiring.setdefault(session_id, trio.Lock())
        try:
            async with lock:
                self._retirements[session_id] = self._retirements.get(session_id, 0) + 1
                actor = self._sessions.pop(session_id, None)
                if actor is not None:
                    actor.retired = True
                    try:
                        await self.supervisor.stop_child(actor.id)
                    except ActorNotFound:
                        pass  # it had just been passivated
                self._infos.pop(session_id, None)  # only now: a stopping drain reads it
                yield
        finally:
            if self._retiring.get(session_id) is lock and not lock.statistics().tasks_waiting:
                del self._retiring[session_id]

    # -- used by SessionActors ----------------------------------------------------------

    def remember(self, info: SessionInfo) -> None:
        self._infos[info.id] = info

    def session_info(self, session_id: str) -> SessionInfo:
        return self._infos[session_id]

    def known_info(self, session_id: str) -> SessionInfo | None:
        """The info of a session whose actor is active, or of one created in this process
        and unchanged since (:meth:`created_info`), else None (nothing is read)."""
        return self._infos.get(session_id) or self._created.get(session_id)

    def created_info(self, session_id: str) -> SessionInfo | None:
        """The info of a session created in this process and unchanged since, as the store
        has it, else None (nothing is read; always None in cluster mode)."""
        return self._created.get(session_id)

    def refresh_info(self, info: SessionInfo) -> None:
        """Hand an active session's actor its info after a change outside its drains (a
        revert); no-op for an inactive session."""
        if info.id in self._infos:
            self._infos[info.id] = info

    def busy_sessions(self) -> set[str]:
        """Sessions whose drain runs or is pending in this process now."""
        return {a.id for a in self.active_sessions() if not a.idle}

    def active_sessions(self) -> list[SessionActor]:
        return list(self._sessions.values())

    def active(self, session_id: str) -> SessionActor | None:
        """The session's SessionActor when it is active in this process."""
        return self._sessions.get(session_id)

    # -- activation -----------------------------------------------------------------------

    async def _activate(self, session_id: str) -> SessionActor | None:
        actor = self._sessions.get(session_id)
        if actor is not None or session_id in self._retiring:
            return actor
        retired = self._retirements.get(session_id, 0)
        info = self._created.get(session_id)
        if info is None:
            info = await self.storage.read(GetSession(session_id=session_id))
        if info is None or self._retirements.get(session_id, 0) != retired:
            return None  # gone, or being deleted (it was retired while the read ran)
        actor = self._sessions.get(session_id)
        if actor is None:
            self._infos[session_id] = info
            actor = SessionActor(session_id, self.ports)
            self._sessions[session_id] = actor
            self.supervisor.start_child(actor)
            if len(self._sessions) > self._max_active and self._nursery_ready():
                self._shed_soon()
        return actor

    def _nursery_ready(self) -> bool:
        return self.supervisor._nursery is not None and not self._shedding

    def _shed_soon(self) -> None:
        """Passivate least recently used idle actors beyond ``max_active`` (in the background)."""
        self._shedding = True

        async def shed() -> None:
            try:
                idle = sorted(
                    (a for a in self._sessions.values() if self._passivable(a)),
                    key=lambda a: a.last_active,
                )
                for actor in idle[: len(self._sessions) - self._max_active]:
                    await self._passivate(actor)
            finally:
                self._shedding = False

        assert self.supervisor._nursery is not None
        self.supervisor._nursery.start_soon(shed)

    @staticmethod
    def _passivable(actor: SessionActor) -> bool:
        return actor.idle and actor.mailbox.statistics().depth == 0

    async def _passivate(self, actor: SessionActor) -> None:
        """Passivate an idle actor; one that got work meanwhile is started again."""
        if self._sessions.get(actor.id) is not actor or not self._passivable(actor):
            return
        await self.supervisor.passivate_child(actor.id)
        if not actor.idle:  # took a wake or an opening just as it stopped: no drain ran
            actor.mailbox.send_nowait(Wake(WAKE_ANY))
        if actor.mailbox.statistics().depth:
            self.supervisor.start_child(actor)
            return
        if self._sessions.get(actor.id) is actor:
            del self._sessions[actor.id]
            self._infos.pop(actor.id, None)

    async def shutdown(self) -> None:
        """Stop every SessionActor (active drains are interrupted and settle) while storage
        still runs; used when the runtime closes (``closing`` is set from then on)."""
        self.closing = True
        for actor in list(self._sessions.values()):
            self._sessions.pop(actor.id, None)
            try:
                await self.supervisor.stop_child(actor.id)
            except ActorNotFound:
                pass  # it ended already (the runtime's nursery is being cancelled)

    async def _sweep(self) -> None:
        while True:
            await trio.sleep(_SWEEP_EVERY)
            await self.passivate_idle(older_than=self._idle_timeout)

    async def passivate_idle(self, *, older_than: float) -> int:
        """Passivate idle SessionActors unused for *older_than* seconds; return how many."""
        cutoff = trio.current_time() - older_than
        idle = [
            a for a in self._sessions.values() if self._passivable(a) and a.last_active <= cutoff
        ]
        for actor in idle:
            await self._passivate(actor)
        return len(idle)
