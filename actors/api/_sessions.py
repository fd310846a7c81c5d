"""``rt.sessions``: the embedded session API, with OpenCode V2's semantics."""

from __future__ import annotations

import builtins
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Final, Literal

import trio
from msgspec import UNSET
from msgspec.structs import replace

from actors.api._chat_message import admission_prompt
from actors.api._pages import Page, SessionEvent, check_limit, decoded, parse_cursor
from actors.api._permission_requests import PermissionRequests
from actors.api._projects import Projects
from actors.cluster import ClusterOptions, wait_elsewhere
from actors.kernel import OVERFLOWED, EventHub
from actors.session import (
    DEFAULT_ADMISSION_TIMEOUT,
    Reverts,
    SessionExecution,
    admit_and_open,
    check_directory,
)
from actors.store import StorageActor
from runtime import (
    IdGenerator,
    InputAdmitted,
    InvalidInputError,
    InvalidSessionInputError,
    Location,
    ModelRef,
    Prompt,
    ResumeNotNeededError,
    SessionInfo,
    SessionMessage,
    SessionNotFoundError,
    llm,
)
from runtime import events as ev
from runtime.history import to_llm_model, visible_history
from runtime.inbox import check_id, check_prompt
from runtime.revert import visible_rows
from runtime.telemetry import records_text, span
from runtime.titles import default_title
from storage import (
    AdmitPrompt,
    Append,
    Children,
    ContextView,
    CreateSession,
    DeleteSession,
    Events,
    EventsTail,
    GetSession,
    ListSessions,
    Messages,
    RevertStands,
    SessionsNeedingResume,
    SetTitle,
    StoredEvent,
)

__all__ = ["Page", "SessionEvent", "Sessions"]

_log = logging.getLogger("kittiwake.sessions")
_PAGE: Final = 500
_HISTORY_LIMIT: Final = 1000
_DELETED: Final = ev.SessionDeleted.__struct_config__.tag
_CREATED: Final = ev.SessionCreated.__struct_config__.tag


def _in_log(kind: str) -> bool:
    """Whether a session's history and streams carry an event of type *kind*: every event
    that takes a seq in its log does, from seq 1 on, so a client sees 1..n and can check
    continuity. ``session.created`` (seq 0) is the session itself (its info), as in
    OpenCode; ``session.deleted`` ends the log, and its streams with it."""
    return kind != _CREATED and kind != _DELETED


class Sessions(PermissionRequests):
    """Create, prompt, read and drive sessions. Obtain it as ``rt.sessions``.

    *admission_timeout*: the seconds a prompt that opens an idle session's activity in
    its own batch waits for that batch, cancelled or not, before it answers that the
    admission is not known (see :meth:`prompt`).
    """

    def __init__(
        self, *, storage: StorageActor, hub: EventHub, execution: SessionExecution,
        ids: IdGenerator, now_ms: Callable[[], int], projects: Projects,
        cluster: ClusterOptions | None = None,
        admission_timeout: float = DEFAULT_ADMISSION_TIMEOUT,
    ) -> None:  # fmt: skip
        self._cluster = cluster
        self._admission_timeout = admission_timeout
        self._storage = storage
        self._hub = hub
        self._x = execution
        self._ids = ids
        self._now = now_ms
        self._projects = projects
        self.reverts = Reverts(
            storage=storage, execution=execution, now_ms=now_ms, shared=cluster is not None
        )
        """Revert, unrevert and commit (``actors.Reverts``)."""

    async def create(
        self, *, id: str | None = None, location: Location, agent: str | None = None,
        model: ModelRef | None = None, title: str | None = None, parent_id: str | None = None,
        project_id: str | None = None,
    ) -> SessionInfo:  # fmt: skip
        """Create a session; reusing an existing id returns that session unchanged.

        With *parent_id*, the session is a child of that one (``children``); deleting
        the parent deletes it too. It belongs to project *project_id* (a caller naming one
        has checked that the directory is that project's), else to its directory's
        (``Projects.id_of``: found, never registered by this).

        Raises:
            InvalidSessionInputError: a Location, agent or model the session could not run
                with (``check_input``); nothing is written.
            InvalidInputError: a malformed id.
            SessionNotFoundError: no session *parent_id* (checked in the creating batch).
        """
        if id is not None:
            check_id("ses", id)
        if parent_id is not None:
            check_id("ses", parent_id)
        await self.check_input(location, agent=agent, model=model)
        if project_id is None:
            project_id = await self._projects.id_of(location.directory)
        session_id = id or self._ids.new("ses")
        now = self._now()
        info = SessionInfo(
            id=session_id, project_id=project_id, location=location,
            title=title or default_title(session_id), time=ev.SessionTime(created=now, updated=now),
            agent=agent if agent is not None else UNSET, model=model if model is not None else UNSET,
            parent_id=parent_id if parent_id is not None else UNSET,
        )  # fmt: skip
        fresh = id is None
        stored, _ = await self._storage.write(CreateSession(info=info, fresh=fresh))
        return stored

    async def prompt(
        self, session_id: str, *, prompt: Prompt, id: str | None = None,
        delivery: ev.Delivery = "steer", resume: bool = True,
    ) -> InputAdmitted:  # fmt: skip
        """Admit *prompt* durably, then (unless ``resume=False``) wake the session.

        The session's Location's plugins see the prompt first (``chat_message``, once,
        before the write): what they return is what is admitted. A required plugin's
        failure refuses the prompt, writing nothing.

        The inbox row is durable before this returns and before any wake. An exact
        retry (same id, session, prompt, delivery) returns the stored receipt: the same
        fields, with ``promoted_seq`` once the prompt has been promoted (OpenCode's
        ``SessionInputAdmitted.promotedSeq``).
        When the session's actor is active, idle and ready, the drain's opening
        promotion is made in the admission's own batch and handed to the actor instead
        of a wake (``actors.session._opening``); cancellation then waits for that batch, a few
        milliseconds, at most ``admission_timeout`` seconds. An actor that stops
        meanwhile (its session deleted, the runtime closing) is not handed it; the
        admission stands.

        Raises:
            StorageError: the commit failed or the store stopped before answering (an
                exact retry is safe); on the opening path also when the batch was not
                answered within ``admission_timeout`` (see ``admit_and_open``).
            InvalidInputError: empty or oversized text, malformed ids; nothing written.
            SessionNotFoundError: no such session.
            PromptConflictError: the message id was used for something else.
            OperationUnavailableError: a required plugin's ``chat_message`` failed.
        """
        check_id("ses", session_id)
        check_prompt(prompt, delivery)
        if id is not None:
            check_id("msg", id)
        message_id = id or self._ids.new("msg")
        prompt = await admission_prompt(
            self._x, self._storage, session_id, message_id, prompt, delivery, retry=id is not None
        )
        if await self.reverts.standing_here(session_id):
            await self.reverts.commit(session_id)  # the reverted messages go for good
        op = AdmitPrompt(
            session_id=session_id, message_id=message_id, prompt=prompt, delivery=delivery,
            timestamp=self._now(), fresh=id is None, unless_reverted=self._cluster is not None,
        )  # fmt: skip
        attributes = {"session.id": session_id, "kittiwake.delivery": delivery}
        with span("admission", attributes) as current:
            if records_text():
                current.set_attribute("kittiwake.prompt", prompt.text)
            try:
                return await self._admit(op, resume=resume)
            except RevertStands:  # another worker's revert: nothing was written
                await self.reverts.commit(session_id)
                return await self._admit(replace(op, unless_reverted=False), resume=resume)

    async def _admit(self, op: AdmitPrompt, *, resume: bool) -> InputAdmitted:
        """Admit *op*, opening the session's next activity in the same batch when its
        actor reserved it, else waking the session (unless not *resume*)."""
        session_id = op.session_id
        reserved = self._x.reserve_opening(session_id) if resume else None
        if reserved is not None:
            opened = await admit_and_open(
                self._storage, op, *reserved, admission_timeout=self._admission_timeout
            )
            if opened is not None:
                return opened
        receipt, _ = await self._storage.write(op)
        if resume:
            await self._x.wake(session_id, receipt.admitted_seq)
        return receipt

    async def get(self, session_id: str) -> SessionInfo:
        """The session; one created in this process and unchanged since is answered without
        reading the store (``SessionExecution.created_info``). Raises SessionNotFoundError."""
        info = self._x.created_info(session_id)
        if info is not None:
            await trio.lowlevel.checkpoint()
            return info
        info = await self._storage.read(GetSession(session_id=session_id))
        if info is None:
            raise SessionNotFoundError(session_id)
        return info

    async def list(
        self, *, limit: int = 50, cursor: str | None = None, project_id: str | None = None
    ) -> Page:
        """Sessions, newest first (of project *project_id* only, when given); pass
        ``page.next`` as *cursor* for the next page."""
        check_limit(limit)
        query = ListSessions(limit=limit + 1, before=cursor, project_id=project_id)
        rows = await self._storage.read(query)
        more = len(rows) > limit
        rows = rows[:limit]
        return Page(data=rows, next=rows[-1].id if more and rows else None, previous=cursor)

    async def messages(
        self, session_id: str, *, limit: int = 50, order: Literal["asc", "desc"] = "desc",
        cursor: str | None = None,
    ) -> Page:  # fmt: skip
        """A page of projected messages ordered by their creating event.

        Cursors look like ``"<asc|desc>:<seq>"``; a cursor carries its own order.
        Raises SessionNotFoundError, InvalidInputError (bad limit or cursor).
        """
        check_limit(limit)
        info = await self.get(session_id)
        if cursor is not None:
            order, seq = parse_cursor(cursor)
        else:
            seq = None
        after, before = (seq, None) if order == "asc" else (None, seq)
        rows = await self._storage.read(
            Messages(session_id=session_id, limit=limit + 1, order=order, after_seq=after,
                     before_seq=before)
        )  # fmt: skip
        more = len(rows) > limit
        rows = rows[:limit]
        nxt = f"{order}:{rows[-1][0]}" if more and rows else None
        prev = f"{'desc' if order == 'asc' else 'asc'}:{rows[0][0]}" if rows and cursor else None
        shown = visible_rows(rows, info)  # a page may come out short: reverted messages
        return Page(data=[message for _, message in shown], next=nxt, previous=prev)

    async def context(self, session_id: str) -> builtins.list[SessionMessage]:
        """The model-visible history, chronological. Raises SessionNotFoundError."""
        info = await self.get(session_id)
        rows, epoch = await self._storage.read(ContextView(session_id=session_id))
        visible = visible_history(visible_rows(rows, info), epoch.baseline_seq if epoch else None)
        return [message for _, message in visible]

    async def events(
        self, session_id: str, *, after: int | None = None
    ) -> AsyncGenerator[SessionEvent, None]:
        """Replay the session's durable events with seq > *after*, then tail live commits:
        every event of its log from seq 1 on, whatever its type (``session.next.*``,
        ``session.updated``, ``session.resume.needed``, ``permission.v2.*``, ...), so the
        seqs run 1..n.

        No gap and no duplicate: the subscription is registered before the replay,
        and the store is re-read whenever a notification does not follow the cursor
        (or the subscriber's buffer overflowed). One flat generator, so ``aclose``
        or cancellation ends it and releases the subscription at once. It ends by
        itself when the session is deleted. Raises SessionNotFoundError.
        """
        await self.get(session_id)
        cursor = -1 if after is None else after
        with self._hub.subscribe(session_id) as sub:
            while True:
                page, gone = await self._storage.read(
                    EventsTail(session_id=session_id, after=cursor, limit=_PAGE)
                )
                if gone:
                    return  # deleted while this subscriber was behind (its event was dropped)
                for stored in page:
                    cursor = stored.seq
                    if _in_log(stored.type):
                        yield decoded(stored)
                if len(page) == _PAGE:
                    continue
                while True:
                    try:  # a commit's events arrive together: take them in one go
                        item = sub.receive_nowait()
                    except trio.WouldBlock:
                        item = await sub.receive()
                    if item == OVERFLOWED:
                        break
                    if not isinstance(item, StoredEvent) or item.seq <= cursor:
                        continue
                    if item.type == _DELETED:
                        return
                    if item.seq != cursor + 1:
                        break
                    cursor = item.seq
                    if _in_log(item.type):
                        yield decoded(item)

    def active(self) -> builtins.list[str]:
        """Sessions whose drain is running in this process now (others are inactive)."""
        return sorted(a.id for a in self._x.active_sessions() if not a.idle)

    async def history(
        self, session_id: str, *, after: int | None = None, limit: int = 100
    ) -> tuple[builtins.list[SessionEvent], bool]:
        """One page of the session's durable events with seq > *after*, at most *limit*
        (1-1000): every event of its log from seq 1 on, whatever its type, as ``events``
        yields them; return it and whether more events follow now.

        Raises SessionNotFoundError, InvalidInputError (bad limit).
        """
        if not 1 <= limit <= _HISTORY_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {_HISTORY_LIMIT}, got {limit}")
        await self.get(session_id)
        cursor = -1 if after is None else after
        page: builtins.list[SessionEvent] = []
        while True:
            rows = await self._storage.read(
                Events(session_id=session_id, after=cursor, limit=_PAGE)
            )
            for stored in rows:
                if not _in_log(stored.type):
                    continue
                if len(page) == limit:
                    return page, True
                page.append(decoded(stored))
            if len(rows) < _PAGE:
                return page, False
            cursor = rows[-1].seq

    async def rename(self, session_id: str, title: str) -> SessionInfo:
        """Give the session *title* (a durable ``session.updated``); the updated info.

        Raises SessionNotFoundError. Cancellation before the write is acknowledged leaves
        the title changed or not.
        """
        updated = await self._storage.write(
            SetTitle(session_id=session_id, title=title, timestamp=self._now(), rename=True)
        )
        if updated is None:
            raise SessionNotFoundError(session_id)
        return updated

    async def children(self, session_id: str) -> builtins.list[SessionInfo]:
        """The sessions created with this one as their parent, oldest first.

        Raises SessionNotFoundError.
        """
        await self.get(session_id)
        return await self._storage.read(Children(session_id=session_id))

    async def delete(self, session_id: str) -> builtins.list[SessionInfo]:
        """Delete the session, its child sessions and everything they hold; return every
        session deleted, as it was: descendants first, the session last.

        Children go first, depth first, each as its own deletion. Its messages, inbox,
        permission requests, context epoch and stored events all go.
        An active drain is cancelled and settles first, and nothing activates the session
        meanwhile. The deletion is one durable event, ``session.deleted``, journaled like
        any other: once this returns, the session stays deleted across a killed process.
        Subscribers to the session's events see the stream end; subscribers to every
        session see the event. Cancellation before the write deletes nothing.

        Raises:
            SessionNotFoundError: no such session.
            InvalidInputError: a malformed id.
        """
        check_id("ses", session_id)
        deleted: builtins.list[SessionInfo] = []
        for child in await self.children(session_id):
            try:
                deleted += await self.delete(child.id)
            except SessionNotFoundError:
                pass  # deleted meanwhile
        async with self._x.retiring(session_id):
            info = await self._storage.write(
                DeleteSession(session_id=session_id, timestamp=self._now())
            )
        _log.info("session deleted", extra={"session": session_id, "title": info.title})
        # A child created while this ran, before the deletion committed, is found now; none
        # can be created after it (the creating batch checks that the parent exists).
        for child in await self._storage.read(Children(session_id=session_id)):
            try:
                deleted += await self.delete(child.id)
            except SessionNotFoundError:
                pass  # deleted meanwhile
        return [*deleted, info]

    async def interrupt(self, session_id: str) -> None:
        """Record the interrupt durably and stop the active drain; no-op for idle or unknown."""
        info = await self._storage.read(GetSession(session_id=session_id))
        if info is None:
            await self._x.interrupt(session_id)
            return
        event = ev.InterruptRequested(timestamp=self._now(), session_id=session_id)
        seqs = await self._storage.write(Append(session_id=session_id, events=[event]))
        await self._x.interrupt(session_id, seqs[0])

    async def compact(self, session_id: str) -> None:
        """Ask for a manual compaction: at the session's next safe provider-turn boundary,
        or at once when it is idle. Returns when the session's actor has the request (a
        later ``wait_idle`` waits for the compaction); nothing happens when there is no
        complete turn to compact. Raises SessionNotFoundError."""
        await self.get(session_id)
        await self._x.compact(session_id)

    async def resume(self, session_id: str, *, wait: bool = True, if_needed: bool = False) -> None:
        """Run the session now (at least one provider attempt, continuing from its durable
        history); by default returns when that drain ends.

        With ``wait=False`` it returns once the session's actor has the run (a later
        ``wait_idle`` waits for it). With ``if_needed=True`` only a session that needs a
        resume (``SessionInfo.needs_resume``: a crash cut its work) is run. The run's
        first provider turn clears ``needs_resume``. Cancelling the wait leaves the run
        going.

        Raises:
            SessionNotFoundError: no such session.
            ResumeNotNeededError: ``if_needed`` and the session does not need a resume.
        """
        info = await self.get(session_id)
        if if_needed and info.needs_resume is not True:
            raise ResumeNotNeededError(session_id)
        if wait:
            await self._x.run(session_id)
        else:
            await self._x.start_run(session_id)

    async def wait_idle(self, session_id: str) -> None:
        """Wait until the session has no active or pending drain; in cluster mode on any
        worker (``actors.cluster._cluster.wait_elsewhere``), unless this worker's drain
        parked the session's lease after the wait began, finding nothing pending."""
        began = trio.current_time()
        await self._x.wait_idle(session_id)
        if self._cluster is not None and not self._x.settled_since(session_id, began):
            await wait_elsewhere(self._storage, self._hub, session_id, self._cluster)

    async def check_input(
        self, location: Location, *, agent: str | None = None, model: ModelRef | None = None,
        check_location: bool = True,
    ) -> None:  # fmt: skip
        """Refuse a Location, agent or model a session could not run with.

        The one check behind ``create``, ``switch_agent`` and ``switch_model`` (callers
        that switch both may check both first). The Location's directory must be an
        absolute path to an existing directory (unless ``check_location=False``: a switch
        keeps the session's Location). *agent* and *model* are checked against the
        Location as its next turn would see it (configuration and agent files read again
        if they changed): *agent* must be one of its agents, *model* one its provider
        client reaches (``SessionExecution.client_for``: configured providers included),
        when that client can tell (a ``runtime.llm.ModelResolver`` such as
        ``ProviderClient``). It writes nothing; it may start the Location's actor.
        Cancellation abandons the check.

        Raises:
            InvalidSessionInputError: with ``field`` ``"location"``, ``"agent"`` or
                ``"model"``.
        """
        directory = location.directory
        if check_location:
            check_directory(directory)
        if agent is None and model is None:
            return
        place = await self._x.current_location(directory)
        if agent is not None and agent not in place.agents:
            known = ", ".join(sorted(place.agents))
            raise InvalidSessionInputError(
                "agent", f"Unknown agent {agent!r}; known agents: {known}"
            )
        client = self._x.client_for(place)
        if model is not None and isinstance(client, llm.ModelResolver):
            try:
                client.resolve_model(to_llm_model(model))
            except llm.CatalogError as exc:
                name = f"{model.provider_id}/{model.id}"
                raise InvalidSessionInputError("model", f"Unknown model {name}: {exc}") from None

    async def switch_agent(self, session_id: str, agent: str) -> SessionInfo:
        """Select *agent* from the next provider turn on.

        Raises:
            SessionNotFoundError: no such session.
            InvalidSessionInputError: an agent the session's Location does not have.
        """
        info = await self.get(session_id)
        await self.check_input(info.location, agent=agent, check_location=False)
        event = ev.AgentSwitched(
            timestamp=self._now(),
            session_id=session_id,
            message_id=self._ids.new("msg"),
            agent=agent,
        )
        return await self._switch(session_id, event)

    async def switch_model(self, session_id: str, model: ModelRef) -> SessionInfo:
        """Select *model* from the next provider turn on.

        Raises:
            SessionNotFoundError: no such session.
            InvalidSessionInputError: a model the provider client does not reach.
        """
        info = await self.get(session_id)
        await self.check_input(info.location, model=model, check_location=False)
        event = ev.ModelSwitched(
            timestamp=self._now(),
            session_id=session_id,
            message_id=self._ids.new("msg"),
            model=model,
        )
        return await self._switch(session_id, event)

    async def _switch(self, session_id: str, event: ev.DurableEvent) -> SessionInfo:
        await self._storage.write(Append(session_id=session_id, events=[event]))
        info = await self.get(session_id)
        self._x.remember(info)
        return info

    async def needs_resume(self) -> builtins.list[str]:
        """Sessions a crash cut short, continued only by an explicit ``resume``: those
        marked ``needs_resume``, and any whose latest work shows it cut short (or a tool
        call left without a result) before recovery ran (``open_runtime`` recovers every
        such session at start-up)."""
        return await self._storage.read(SessionsNeedingResume())
