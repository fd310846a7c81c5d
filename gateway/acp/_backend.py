"""What the ACP agent drives: ``Backend``, the session API it needs, and its embedded form
over a ``Runtime`` in this process (``rt.sessions``, ``rt.tools``, the event hub).

``gateway.acp._attached`` is the same API over a running ``kittiwake serve``'s HTTP routes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Final, Literal, Protocol, TypeVar

import msgspec
import trio

from actors import OVERFLOWED, Runtime, SessionEvent, Subscription, fork_session
from runtime import (
    IdGenerator,
    InputAdmitted,
    LiveDelta,
    Location,
    ModelRef,
    Prompt,
    SessionInfo,
    SessionNotFoundError,
)
from runtime.agents import AgentInfo, CommandInfo
from runtime.events import (
    PermissionAsked,
    PermissionInfo,
    SessionCreated,
    SessionDeleted,
    decode_event,
)
from runtime.mcp import McpServerSpec
from runtime.tools import ToolIO
from storage import StoredEvent

__all__ = [
    "Backend",
    "EmbeddedBackend",
    "Follow",
    "Item",
    "MAX_FORK_MESSAGES",
    "ModelChoice",
    "Offer",
    "Reply",
    "Settled",
    "next_or_idle",
    "primary_agents",
]

MAX_FORK_MESSAGES: Final = 10_000
"""The most messages ``session/fork`` copies."""
DEFAULT_FOLLOW_BUFFER: Final = 4096
"""Events and deltas a prompt's hub subscription holds unread (``EmbeddedBackend``)."""
_PAGE: Final = 1000
_CREATED: Final = SessionCreated.__struct_config__.tag
_DELETED: Final = SessionDeleted.__struct_config__.tag
_ASKED: Final = PermissionAsked.__struct_config__.tag
Item = SessionEvent | LiveDelta
Reply = Literal["once", "always", "reject"]
T_co = TypeVar("T_co", covariant=True)


class ModelChoice(msgspec.Struct, frozen=True, kw_only=True):
    """A model a session may switch to: its reference, its name, its context window."""

    ref: ModelRef
    name: str
    context: int | None = None


class Offer(msgspec.Struct, frozen=True, kw_only=True):
    """What a Location offers its sessions: the agents a person picks (primary ones), the
    commands, the models of the providers with credentials, and the model a session runs
    with when neither it nor its agent selects one (the configured one, else the default)."""

    agents: list[AgentInfo]
    commands: list[CommandInfo]
    models: list[ModelChoice]
    model: ModelRef


class Follow(Protocol):
    """A session's stream, subscribed before the work it follows is started."""

    def items(
        self, after: int, idle: trio.Event, *, behind: bool = False
    ) -> AsyncGenerator[Item, None]:
        """The session's durable events after seq *after* (none missed, none twice) and its
        live deltas as they come, until *idle* is set and no durable event is left after
        the last one yielded, or the session is deleted. *behind*: events after *after*
        may have been written before the subscription was taken (else it was taken before
        the work whose events follow *after* began)."""
        ...


class Settled(Protocol):
    """A session's MCP servers as they run (``runtime.mcp.McpServers`` in process)."""

    async def settled(self) -> None:
        """Wait until none is still connecting (bounded by the connect timeout)."""
        ...


class Backend(Protocol):
    """The session API the ACP agent uses; every method raises the runtime's errors
    (``SessionNotFoundError``, ``InvalidInputError``, ...) for what it refuses."""

    async def create(self, directory: str) -> SessionInfo: ...
    async def get(self, session_id: str) -> SessionInfo: ...
    async def sessions(
        self, limit: int, cursor: str | None
    ) -> tuple[list[SessionInfo], str | None]: ...
    async def fork(self, session_id: str) -> SessionInfo: ...
    async def delete(self, session_id: str) -> None:
        """Delete the session, its child sessions and everything they hold (durably)."""
        ...

    async def prompt(
        self, session_id: str, prompt: Prompt, *, id: str | None = None
    ) -> InputAdmitted:
        """Admit *prompt* durably; with the caller's message *id* (``msg_...``), the same
        prompt sent again is an exact retry: the stored receipt, no second turn."""
        ...

    async def command(self, session_id: str, name: str, arguments: str) -> InputAdmitted: ...
    async def interrupt(self, session_id: str) -> None: ...
    async def busy(self, session_id: str) -> bool:
        """Whether the session's drain runs now."""
        ...

    async def wait_idle(self, session_id: str) -> None: ...
    async def history(self, session_id: str, after: int) -> tuple[list[SessionEvent], bool]: ...
    def follow(self, session_id: str, after: int | None) -> AbstractAsyncContextManager[Follow]:
        """Subscribe to the session's stream before the work it follows starts; *after*:
        the last seq of the session known to be written (``None``: not known)."""
        ...

    def descendant_asks(self, session_id: str) -> AsyncGenerator[PermissionInfo, None]:
        """The pending permission requests of the subagent children running under the
        session's task calls (and theirs): those pending now, then each one as it is
        asked, each once. Runs until cancelled."""
        ...

    async def reply_permission(self, session_id: str, request_id: str, reply: Reply) -> None: ...
    async def reply_question(
        self, session_id: str, request_id: str, answers: list[list[str]]
    ) -> None: ...
    async def reject_question(self, session_id: str, request_id: str) -> None: ...
    async def switch_agent(self, session_id: str, agent: str) -> SessionInfo: ...
    async def switch_model(self, session_id: str, model: ModelRef) -> SessionInfo: ...
    async def offer(self, directory: str) -> Offer: ...
    def route_io(self, session_id: str, io: ToolIO) -> AbstractAsyncContextManager[None]:
        """While in this block, the session's file and shell tools go through *io* (the
        editor's), wherever they run."""
        ...

    def mcp_servers(
        self, session_id: str, specs: Mapping[str, McpServerSpec]
    ) -> AbstractAsyncContextManager[Settled]:
        """While in this block, *specs* run as the session's own MCP servers, wherever its
        tools run."""
        ...


def primary_agents(agents: Sequence[AgentInfo]) -> list[AgentInfo]:
    """The agents a person picks for a session (not subagents), by name."""
    return sorted((a for a in agents if a.mode != "subagent"), key=lambda a: a.name)


class EmbeddedBackend:
    """``Backend`` over a runtime in this process.

    Args:
        rt: the runtime (its data dir held by this process).
        models: the models sessions may switch to (the providers with credentials).
        max_buffer: events and deltas a prompt's hub subscription holds unread; past it
            the subscription overflows and the store fills what it dropped.
    """

    def __init__(
        self, rt: Runtime, *, models: Sequence[ModelChoice] = (),
        max_buffer: int = DEFAULT_FOLLOW_BUFFER,
    ) -> None:  # fmt: skip
        self._rt = rt
        self._models = list(models)
        self._ids = IdGenerator()
        self._max_buffer = max_buffer

    async def create(self, directory: str) -> SessionInfo:
        info = await self._rt.sessions.create(location=Location(directory=directory))
        await self._rt.projects.registered(directory)
        return info

    async def get(self, session_id: str) -> SessionInfo:
        return await self._rt.sessions.get(session_id)

    async def sessions(
        self, limit: int, cursor: str | None
    ) -> tuple[list[SessionInfo], str | None]:
        page = await self._rt.sessions.list(limit=limit, cursor=cursor)
        return [info for info in page.data if isinstance(info, SessionInfo)], page.next

    async def fork(self, session_id: str) -> SessionInfo:
        return await fork_session(
            self._rt, session_id, before=None, max_messages=MAX_FORK_MESSAGES, ids=self._ids,
            now=int(time.time() * 1000),
        )  # fmt: skip

    async def delete(self, session_id: str) -> None:
        await self._rt.sessions.delete(session_id)

    async def prompt(
        self, session_id: str, prompt: Prompt, *, id: str | None = None
    ) -> InputAdmitted:
        return await self._rt.sessions.prompt(session_id, prompt=prompt, id=id)

    async def command(self, session_id: str, name: str, arguments: str) -> InputAdmitted:
        return await self._rt.tools.commands.run(session_id, name, arguments)

    async def interrupt(self, session_id: str) -> None:
        await self._rt.sessions.interrupt(session_id)

    async def busy(self, session_id: str) -> bool:
        return session_id in self._rt.sessions.active()

    async def wait_idle(self, session_id: str) -> None:
        await self._rt.sessions.wait_idle(session_id)

    async def history(self, session_id: str, after: int) -> tuple[list[SessionEvent], bool]:
        return await self._rt.sessions.history(session_id, after=after, limit=_PAGE)

    @asynccontextmanager
    async def follow(self, session_id: str, after: int | None) -> AsyncIterator[Follow]:
        with self._rt.hub.subscribe(session_id, max_buffer=self._max_buffer) as subscription:
            yield _HubFollow(self, session_id, subscription)

    async def descendant_asks(self, session_id: str) -> AsyncGenerator[PermissionInfo, None]:
        tools, seen = self._rt.tools, set[str]()
        with self._rt.hub.subscribe(None) as sub:
            stale = True
            while True:
                if stale:  # list them again: cheap, and nothing is missed
                    for child in tools.running_descendants(session_id):
                        try:
                            asked = await self._rt.sessions.permissions(child)
                        except SessionNotFoundError:
                            continue
                        for info in asked:
                            if info.status == "pending" and info.id not in seen:
                                seen.add(info.id)
                                yield info
                item = await sub.receive()
                stale = item == OVERFLOWED or (
                    isinstance(item, StoredEvent) and item.type == _ASKED
                    and item.aggregate_id in tools.running_descendants(session_id)
                )  # fmt: skip

    async def reply_permission(self, session_id: str, request_id: str, reply: Reply) -> None:
        await self._rt.sessions.reply_permission(session_id, request_id, reply)

    async def reply_question(
        self, session_id: str, request_id: str, answers: list[list[str]]
    ) -> None:
        await self._rt.tools.reply_question(session_id, request_id, answers)

    async def reject_question(self, session_id: str, request_id: str) -> None:
        await self._rt.tools.reject_question(session_id, request_id)

    async def switch_agent(self, session_id: str, agent: str) -> SessionInfo:
        return await self._rt.sessions.switch_agent(session_id, agent)

    async def switch_model(self, session_id: str, model: ModelRef) -> SessionInfo:
        return await self._rt.sessions.switch_model(session_id, model)

    async def offer(self, directory: str) -> Offer:
        place = await self._rt.execution.current_location(directory)
        commands = await self._rt.tools.commands.list(directory)
        return Offer(
            agents=primary_agents(list(place.agents.values())), commands=commands,
            models=self._models, model=place.settings.model or self._rt.execution.default_model,
        )  # fmt: skip

    def route_io(self, session_id: str, io: ToolIO) -> AbstractAsyncContextManager[None]:
        return self._rt.tools.route_io(session_id, io)

    def mcp_servers(
        self, session_id: str, specs: Mapping[str, McpServerSpec]
    ) -> AbstractAsyncContextManager[Settled]:
        return self._rt.tools.mcp_servers(session_id, specs)


class _HubFollow:
    """One subscription to the hub for a session, taken before the work it follows began:
    committed events and deltas in the order they were published; the store fills a gap
    (an overflow, a seq missed).

    Nothing is read from the store otherwise: the store publishes a batch's events before
    its writers resume, so once the session is idle every event of its run is in the
    subscription already (read to its end before ``items`` returns).
    """

    def __init__(self, backend: EmbeddedBackend, session_id: str, sub: Subscription) -> None:
        self._backend = backend
        self._session = session_id
        self._sub = sub

    async def items(
        self, after: int, idle: trio.Event, *, behind: bool = False
    ) -> AsyncGenerator[Item, None]:
        cursor = after
        stored = behind
        while True:
            if stored:
                page, more = await self._backend.history(self._session, cursor)
                for event in page:
                    cursor = event.seq
                    yield event
                if more:
                    continue
                stored = False
                if idle.is_set():
                    return
            item = await self._next(idle)
            if item is None:  # idle, and every event published: the run's are all here
                return
            if item == OVERFLOWED:
                stored = True
            elif isinstance(item, StoredEvent):
                if item.seq <= cursor:
                    continue
                if item.type == _DELETED:
                    return
                if item.seq != cursor + 1:
                    stored = True
                    continue
                cursor = item.seq
                if item.type != _CREATED:
                    yield SessionEvent(seq=item.seq, id=item.id, event=decode_event(item.data))
            elif isinstance(item, LiveDelta):
                yield item

    async def _next(self, idle: trio.Event) -> object | None:
        """The next item of the subscription, or ``None`` once *idle* is set first."""
        return await next_or_idle(self._sub, idle)


class _Source(Protocol[T_co]):
    def receive_nowait(self) -> T_co: ...
    async def receive(self) -> T_co: ...


async def next_or_idle(source: _Source[T_co], idle: trio.Event) -> T_co | None:
    """*source*'s next item, or ``None`` once *idle* is set first (or once the source has
    ended and *idle* is set). A receive cut short by *idle* takes nothing."""
    try:
        return source.receive_nowait()
    except trio.WouldBlock:
        pass
    except trio.EndOfChannel:
        await idle.wait()
        return None
    if idle.is_set():
        return None
    received: list[T_co] = []
    async with trio.open_nursery() as nursery:

        async def receive() -> None:
            try:
                received.append(await source.receive())
            except trio.EndOfChannel:
                await idle.wait()
            nursery.cancel_scope.cancel()

        async def until_idle() -> None:
            await idle.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(receive)
        nursery.start_soon(until_idle)
    return received[0] if received else None
