"""The ACP agent: ``initialize``, ``authenticate`` and the ``session/*`` methods over a
``Backend``, one connection (one editor) at a time.

An ACP session is a Kittiwake session (the same id). ``session/prompt`` admits the prompt
durably, follows the session's stream until it is idle (sending each update as it comes
and putting each permission request to the client), then answers the stop reason;
``session/cancel`` interrupts it (durably, as ``interrupt`` does), and the prompt answers
``cancelled``. ``session/load`` replays the whole history from the store, so a session
survives the agent's process being killed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import Any, Final, TypeVar

import msgspec
import trio

from actors import SessionEvent
from gateway.acp._asks import Asker
from gateway.acp._backend import Backend
from gateway.acp._content import leading_command, to_prompt
from gateway.acp._credentials import StoredCredentials
from gateway.acp._editor import Editor
from gateway.acp._mcp import EditorServers, editor_servers
from gateway.acp._rpc import Connection, Method, RpcError, Then
from gateway.acp._state import (
    BUILD,
    Following,
    Session,
    config_options,
    context_of,
    follow_info,
    session_setup,
)
from gateway.acp._updates import Ask, Delegated, ModelChanged, Question, Updates, iso
from gateway.acp._wire import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PROTOCOL_VERSION,
    RESOURCE_NOT_FOUND,
    AgentCapabilities,
    AuthCapabilities,
    AuthenticateParams,
    AuthMethod,
    AvailableCommand,
    AvailableCommandsUpdate,
    CancelParams,
    ClientCapabilities,
    CommandInput,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    Empty,
    Implementation,
    InitializeParams,
    InitializeResult,
    ListSessionsParams,
    ListSessionsResult,
    LogoutParams,
    McpCapabilities,
    NewSessionParams,
    PromptCapabilities,
    PromptParams,
    PromptResult,
    SessionCapabilities,
    SessionConfigParams,
    SessionIdParams,
    SessionInfoItem,
    SessionSetup,
    SessionUpdate,
    SessionUpdateParams,
    SetConfigOptionParams,
    SetModeParams,
)
from runtime import (
    InvalidInputError,
    KittiwakeError,
    ModelRef,
    PromptConflictError,
    QuestionNotFoundError,
    SessionInfo,
    SessionNotFoundError,
)
from runtime.llm import AuthError
from runtime.revert import hidden_ranges, is_hidden

__all__ = ["AUTH_METHOD", "AcpAgent", "AgentOptions"]

_log = logging.getLogger("kittiwake.acp")
AUTH_METHOD: Final = "kittiwake-auth"
_LISTED: Final = 50
P = TypeVar("P")


class AgentOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The agent's name and version as sent to the client, whether a model provider is
    usable (else ``session/new`` and ``session/prompt`` answer auth required), and whether
    ``logout`` is offered."""

    version: str
    provider_ready: bool = True
    signs_out: bool = False
    """Whether ``logout`` is offered: the data dir, and its stored credentials, are this
    process's (not a server's it attached to)."""


def _rpc_error(exc: KittiwakeError) -> RpcError:
    """The JSON-RPC error a runtime refusal is answered with."""
    data = {"_tag": exc.tag}
    if isinstance(exc, SessionNotFoundError | QuestionNotFoundError):
        return RpcError(RESOURCE_NOT_FOUND, exc.message, data)
    if isinstance(exc, InvalidInputError | PromptConflictError):
        return RpcError(INVALID_PARAMS, exc.message, data)
    return RpcError(INTERNAL_ERROR, exc.message, data)


def _method(
    params: type[P], handler: Callable[[P], Awaitable[Any]], ready: trio.Event | None = None
) -> Method[P]:
    """*handler* as a method; with *ready*, it waits for that first (the backend)."""

    async def handled(decoded: P) -> Any:
        if ready is not None:
            await ready.wait()
        try:
            return await handler(decoded)
        except KittiwakeError as exc:
            raise _rpc_error(exc) from None

    return Method(params=params, handler=handled)


class AcpAgent:
    """ACP's agent side of one connection over *backend*.

    Without a backend yet (``None``), ``initialize`` is answered at once and every other
    method waits until ``attach`` gives one: an editor's handshake does not wait for the
    data dir to open.
    """

    def __init__(self, conn: Connection, backend: Backend | None, options: AgentOptions) -> None:
        self._conn = conn
        self._options = options
        self._sessions: dict[str, Session] = {}
        self._editor = Editor(conn, ClientCapabilities(), self._terminal_shown)
        self._servers = EditorServers(conn)
        self._ready = trio.Event()
        self._attached: tuple[Backend, Asker] | None = None
        self._credentials: StoredCredentials | None = None
        if backend is not None:
            self.attach(backend, provider_ready=options.provider_ready)

    def attach(
        self, backend: Backend, *, provider_ready: bool,
        credentials: StoredCredentials | None = None,
    ) -> None:  # fmt: skip
        """Give the agent its backend (whether a provider is usable, and the credentials
        ``logout`` forgets); the methods waiting for it go on."""
        self._attached = (backend, Asker(self._conn, backend, lambda: self._editor.forms))
        self._credentials = credentials
        self._options = msgspec.structs.replace(self._options, provider_ready=provider_ready)
        self._ready.set()

    @property
    def _backend(self) -> Backend:
        assert self._attached is not None, "the backend is used before it is attached"
        return self._attached[0]

    @property
    def _asker(self) -> Asker:
        assert self._attached is not None, "the backend is used before it is attached"
        return self._attached[1]

    def methods(self) -> dict[str, Method[Any]]:
        """The requests the client may send."""
        ready = self._ready
        signs_out = {"logout": _method(LogoutParams, self.logout, ready)}
        return {
            "initialize": _method(InitializeParams, self.initialize),
            "authenticate": _method(AuthenticateParams, self.authenticate, ready),
            **(signs_out if self._options.signs_out else {}),
            "session/new": _method(NewSessionParams, self.new_session, ready),
            "session/load": _method(SessionSetup, self.load_session, ready),
            "session/resume": _method(SessionSetup, self.resume_session, ready),
            "session/fork": _method(SessionSetup, self.fork_session, ready),
            "session/list": _method(ListSessionsParams, self.list_sessions, ready),
            "session/close": _method(SessionIdParams, self.close_session, ready),
            "session/delete": _method(SessionIdParams, self.delete_session, ready),
            "session/set_mode": _method(SetModeParams, self.set_mode, ready),
            "session/set_config_option": _method(
                SetConfigOptionParams, self.set_config_option, ready
            ),
            "session/prompt": _method(PromptParams, self.prompt, ready),
        }

    def notifications(self) -> dict[str, Method[Any]]:
        """The notifications the client may send."""
        return {"session/cancel": _method(CancelParams, self.cancel, self._ready)}

    async def serve(self) -> None:
        """Answer the client until it closes the connection."""
        await self._conn.serve(self.methods(), self.notifications())

    # -- initialize and authenticate ----------------------------------------------------------

    async def initialize(self, params: InitializeParams) -> InitializeResult:
        """Take the client's capabilities (its files and terminals serve the tools from
        now on) and answer version 1 with the agent's."""
        self._editor = Editor(self._conn, params.client_capabilities, self._terminal_shown)
        description = (
            "Store a model provider's API key with `kittiwake auth login PROVIDER` in a "
            "terminal (or set its environment variable), then restart the agent"
        )
        return InitializeResult(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                session_capabilities=SessionCapabilities(
                    listing=Empty(), delete=Empty(), fork=Empty(), resume=Empty(), close=Empty()
                ),
                auth=AuthCapabilities(logout=Empty() if self._options.signs_out else None),
            ),
            auth_methods=[
                AuthMethod(id=AUTH_METHOD, name="kittiwake auth login", description=description)
            ],
            agent_info=Implementation(
                name="kittiwake", title="Kittiwake", version=self._options.version
            ),
        )  # fmt: skip

    async def authenticate(self, params: AuthenticateParams) -> None:
        """``{}`` when a provider is usable; auth required (``kittiwake auth login``) else."""
        if params.method_id != AUTH_METHOD:
            raise RpcError(INVALID_PARAMS, f"Unknown auth method {params.method_id!r}")
        self._require_provider()

    async def logout(self, params: LogoutParams) -> None:
        """Forget the providers' stored credentials (``kittiwake auth logout`` of each);
        unless a provider still has some (its environment variable, a configured key),
        ``session/new`` and ``session/prompt`` answer auth required from now on. A
        malformed store is ``-32603`` and nothing is removed."""
        if self._credentials is None:
            raise RpcError(INTERNAL_ERROR, "No credentials are stored for this agent to forget")
        try:
            still = await trio.to_thread.run_sync(self._credentials.forget)
        except AuthError as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from None
        ready = still and self._options.provider_ready
        self._options = msgspec.structs.replace(self._options, provider_ready=ready)

    def _require_provider(self) -> None:
        if not self._options.provider_ready:
            raise RpcError(
                AUTH_REQUIRED,
                "No model provider has credentials: run `kittiwake auth login PROVIDER` in a "
                "terminal (or set the provider's API key variable) and restart the agent",
            )  # fmt: skip

    # -- sessions -----------------------------------------------------------------------------

    async def new_session(self, params: NewSessionParams) -> Then:
        """A session working in ``cwd`` with the editor's MCP servers as its own (answered
        once they connected or failed); its commands follow the answer. Servers ACP does
        not describe create nothing (``-32602``); cancellation before the creation is
        written creates nothing."""
        self._require_provider()
        specs = editor_servers(params.mcp_servers, params.cwd)
        info = await self._backend.create(params.cwd)
        session = await self._adopt(info)
        session.cursor = 0  # a new session's log is its creation
        await self._servers.hold(self._backend, session.id, specs)
        return Then(session_setup(session, with_id=True), partial(self._announce, session))

    async def load_session(self, params: SessionSetup) -> Then:
        """Start the editor's MCP servers for the session, replay its whole history (less
        what a revert hides), then answer. Cancellation stops the replay (the client has
        part of it)."""
        specs = editor_servers(params.mcp_servers, params.cwd)
        info = await self._backend.get(params.session_id)
        session = await self._adopt(info)
        await self._servers.hold(self._backend, session.id, specs)
        async with session.lock:
            await self._replay(session, hidden_ranges(info))
        return Then(session_setup(session), partial(self._announce, session, watch=True))

    async def resume_session(self, params: SessionSetup) -> Then:
        """Set the session up here (with the editor's MCP servers) without replaying it."""
        specs = editor_servers(params.mcp_servers, params.cwd)
        session = await self._adopt(await self._backend.get(params.session_id))
        await self._servers.hold(self._backend, session.id, specs)
        return Then(session_setup(session), partial(self._announce, session, watch=True))

    async def fork_session(self, params: SessionSetup) -> Then:
        """A new session with a copy of the whole history (written in one batch), with
        the editor's MCP servers."""
        specs = editor_servers(params.mcp_servers, params.cwd)
        info = await self._backend.fork(params.session_id)
        session = await self._adopt(info)
        await self._servers.hold(self._backend, session.id, specs)
        return Then(session_setup(session, with_id=True), partial(self._announce, session))

    async def list_sessions(self, params: ListSessionsParams) -> ListSessionsResult:
        """A page of top-level sessions, newest first (of ``cwd``, when given)."""
        infos, next_cursor = await self._backend.sessions(_LISTED, params.cursor)
        listed = [
            SessionInfoItem(
                session_id=info.id,
                cwd=info.location.directory,
                title=info.title,
                updated_at=iso(info.time.updated),
            )  # fmt: skip
            for info in infos
            if not isinstance(info.parent_id, str)
            and (params.cwd is None or info.location.directory == params.cwd)
        ]
        return ListSessionsResult(sessions=listed, next_cursor=next_cursor)

    async def close_session(self, params: SessionIdParams) -> None:
        """Forget the session here, interrupting its prompt and stopping its MCP servers;
        it stays durable."""
        session = self._sessions.pop(params.session_id, None)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"Session not open: {params.session_id}")
        self._servers.release(session.id)
        if session.prompt is not None:
            await self._cancel(session)

    async def delete_session(self, params: SessionIdParams) -> None:
        """Delete the session, its subagent sessions and everything they hold, durably (as
        ``DELETE /session/{id}``); its MCP servers stop and a prompt of this connection's
        in it answers ``cancelled``. An unknown session is ``-32002``."""
        session = self._sessions.pop(params.session_id, None)
        self._servers.release(params.session_id)
        if session is not None and session.prompt is not None:
            session.prompt.cancelled = True
        await self._backend.delete(params.session_id)

    async def set_mode(self, params: SetModeParams) -> Then:
        """Switch the session's agent (durably); its options follow the answer."""
        session = await self._session(params.session_id)
        info = await self._backend.switch_agent(session.id, params.mode_id)
        follow_info(session, info)
        return Then(None, partial(self._options_changed, session))

    async def set_config_option(self, params: SetConfigOptionParams) -> SessionConfigParams:
        """Switch the session's agent (``mode``) or model (``model``); every option after."""
        session = await self._session(params.session_id)
        value = params.value
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, f"{params.config_id} takes a string value")
        if params.config_id == "mode":
            info = await self._backend.switch_agent(session.id, value)
        elif params.config_id == "model":
            model = ModelRef.parse(value)
            if model is None:
                raise RpcError(INVALID_PARAMS, f"A model is provider/model, not {value!r}")
            info = await self._backend.switch_model(session.id, model)
        else:
            raise RpcError(INVALID_PARAMS, f"Unknown configuration option {params.config_id!r}")
        follow_info(session, info)
        return SessionConfigParams(config_options=config_options(session))

    async def _session(self, session_id: str) -> Session:
        """The ACP session *session_id*, set up here or now (any existing session)."""
        session = self._sessions.get(session_id)
        if session is None:
            session = await self._adopt(await self._backend.get(session_id))
        return session

    async def _adopt(self, info: SessionInfo) -> Session:
        offer = await self._backend.offer(info.location.directory)
        session = self._sessions.get(info.id)
        if session is None:
            session = Session(
                id=info.id, directory=info.location.directory, agent=BUILD, model=offer.model,
                offer=offer,
            )  # fmt: skip
            self._sessions[info.id] = session
        session.offer = offer
        follow_info(session, info)
        return session

    async def _announce(self, session: Session, *, watch: bool = False) -> None:
        """After a session is set up: the commands it offers; with *watch*, a run going on
        in it is followed (``_watch``)."""
        commands = [
            AvailableCommand(
                name=c.name,
                description=c.description or c.name,
                input=CommandInput(hint="arguments"),
            )  # fmt: skip
            for c in session.offer.commands
        ]
        await self._update(session.id, AvailableCommandsUpdate(available_commands=commands))
        if watch:
            self._conn.start_soon(partial(self._watch, session))

    async def _options_changed(self, session: Session) -> None:
        options = config_options(session)
        await self._update(session.id, ConfigOptionUpdate(config_options=options))

    async def _update(self, session_id: str, update: SessionUpdate) -> None:
        await self._conn.notify(
            "session/update", SessionUpdateParams(session_id=session_id, update=update)
        )

    async def _replay(self, session: Session, hidden: list[tuple[int, int]]) -> None:
        """Send the session's whole history as updates, oldest first, but for the messages
        of the *hidden* seq ranges (a revert's)."""
        updates = Updates(session.directory, replay=True)
        cursor, more = 0, True
        session.cursor = 0
        while more:
            page, more = await self._backend.history(session.id, cursor)
            for event in page:
                cursor = session.cursor = event.seq
                if is_hidden(event.seq, hidden):
                    continue
                for action in updates.feed(event):
                    if not isinstance(action, Ask | Question | ModelChanged | Delegated):
                        await self._update(session.id, action)

    # -- prompts ------------------------------------------------------------------------------

    async def prompt(self, params: PromptParams) -> PromptResult:
        """Admit the prompt (or run its ``/command``), send what its run shows until the
        session is idle, and answer the stop reason.

        Raises ``RpcError``: a prompt already running in the session, blocks that make no
        prompt, or the run's failure (the history keeps it). Cancellation of the request
        (``$/cancel_request``, the connection closing) stops following, and asking the
        client, but not the run: ``session/cancel`` interrupts that.
        """
        self._require_provider()
        session = await self._session(params.session_id)
        running = session.prompt
        if running is not None and running.watched is None:
            raise RpcError(INVALID_REQUEST, f"A prompt is already running in {session.id}")
        if running is not None and running.watched is not None:
            running.watched.cancel()  # this prompt's own following takes over
        command = leading_command(params.prompt, {c.name for c in session.offer.commands})
        admit: Callable[[], Awaitable[Any]]
        if command is not None:
            admit = partial(self._backend.command, session.id, *command)
        else:
            admit = partial(self._backend.prompt, session.id, to_prompt(params.prompt))
        info = await self._backend.get(session.id)
        state = Following(Updates(session.directory, context=context_of(session), cost=info.cost))
        session.prompt = state
        try:
            async with session.lock:
                await self._follow(session, state, admit, switches=command is not None)
        finally:
            session.prompt = None
        updates = state.updates
        failure = updates.failure
        stop = updates.stop_reason(state.cancelled)
        if failure is not None and stop != "cancelled" and stop != "max_turn_requests":
            raise RpcError(INTERNAL_ERROR, failure.message, {"_tag": failure.tag})
        return PromptResult(stop_reason=stop, usage=updates.prompt_usage())

    async def _watch(self, session: Session) -> None:
        """Follow a run already going on in a session just loaded or resumed (another
        client's prompt, or one that went on while the editor was away) until the session
        is idle, as a prompt's: its updates, its permission requests. A prompt of this
        connection's in the session takes over (cancelling this)."""
        if session.prompt is not None or not await self._backend.busy(session.id):
            return
        info = await self._backend.get(session.id)
        state = Following(Updates(session.directory, context=context_of(session), cost=info.cost))
        state.watched = trio.CancelScope()
        session.prompt = state
        try:
            with state.watched:
                async with session.lock:
                    await self._follow(session, state, None)
        finally:
            if session.prompt is state:
                session.prompt = None

    async def _tail(self, session: Session) -> int:
        """The session's last seq (its history read through)."""
        cursor, more = 0, True
        while more:
            page, more = await self._backend.history(session.id, cursor)
            cursor = page[-1].seq if page else cursor
        return cursor

    async def _follow(
        self, session: Session, state: Following, admit: Callable[[], Awaitable[Any]] | None,
        *, switches: bool = False,
    ) -> None:  # fmt: skip
        """Admit the prompt (if any), then send what the session's run shows until it is
        idle; without a prompt, from the last seq the connection saw."""
        following = self._backend.follow(session.id, session.cursor)
        async with following as follow, self._routed(session.id):
            if admit is not None:
                after = (await admit()).admitted_seq - 1
                if state.cancelled:  # cancelled while it was being admitted
                    await self._backend.interrupt(session.id)
            else:
                after = session.cursor if session.cursor is not None else await self._tail(session)
            if switches:  # a command selects its agent and model before its prompt
                await self._switched(session, await self._backend.get(session.id))
            idle = trio.Event()
            async with trio.open_nursery() as nursery:

                async def until_idle() -> None:
                    await self._backend.wait_idle(session.id)
                    idle.set()

                nursery.start_soon(until_idle)
                items = follow.items(after, idle, behind=admit is None)
                async with aclosing(items) as stream:
                    async for item in stream:
                        if isinstance(item, SessionEvent):
                            session.cursor = item.seq
                        for action in state.updates.feed(item):
                            await self._act(session, state, action, nursery)
                nursery.cancel_scope.cancel()  # permission requests left unanswered

    async def _switched(self, session: Session, info: SessionInfo) -> None:
        """Tell the client the agent and model *info* shows, where they changed."""
        agent, model = session.agent, session.model
        follow_info(session, info)
        if session.agent != agent:
            await self._update(session.id, CurrentModeUpdate(current_mode_id=session.agent))
        if session.agent != agent or session.model != model:
            await self._options_changed(session)

    @asynccontextmanager
    async def _routed(self, session_id: str) -> AsyncIterator[None]:
        io = self._editor.tool_io()
        if io is None:
            yield
            return
        async with self._backend.route_io(session_id, io):
            yield

    async def _act(
        self, session: Session, state: Following, action: Any, nursery: trio.Nursery
    ) -> None:
        if isinstance(action, Ask):
            nursery.start_soon(self._asker.permission, session.id, action)
        elif isinstance(action, Delegated):
            if not state.watching:
                state.watching = True
                nursery.start_soon(self._asker.watch_children, session.id, nursery)
        elif isinstance(action, Question):
            nursery.start_soon(self._asker.question, session.id, action)
        elif isinstance(action, ModelChanged):
            session.model = action.model
            await self._options_changed(session)
        else:
            await self._update(session.id, action)
            if isinstance(action, CurrentModeUpdate):
                session.agent = action.current_mode_id
                await self._options_changed(session)

    async def _terminal_shown(self, session_id: str, call_id: str, terminal_id: str) -> None:
        session = self._sessions.get(session_id)
        state = session.prompt if session is not None else None
        if state is None:
            return
        for action in state.updates.terminal(call_id, terminal_id):
            await self._update(session_id, action)

    async def cancel(self, params: CancelParams) -> None:
        """Interrupt the session's running prompt, which then answers ``cancelled``."""
        session = self._sessions.get(params.session_id)
        if session is not None and session.prompt is not None:
            await self._cancel(session)

    async def _cancel(self, session: Session) -> None:
        assert session.prompt is not None
        session.prompt.cancelled = True
        await self._backend.interrupt(session.id)
