"""``rt.tools``: the runtime side of the session tools (todos, questions, plan switches,
subagent tasks), and the API clients use to read todos and answer questions.

It implements ``runtime.tools.AgentToolHost``; every Location's registry gets the tools of
``runtime.tools.session_tools`` over it as one contribution.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio

from actors.api._commands import Commands
from actors.session import DEFAULT_QUESTION_EVENTS, DurableQuestions, SessionExecution
from actors.store import StorageActor
from runtime import AssistantMessage, Location, Prompt, SessionNotFoundError
from runtime import events as ev
from runtime import messages as m
from runtime.mcp import McpServers, McpServerSpec
from runtime.tools import TaskInput, TaskResult, ToolContext, ToolError, ToolIO
from storage import Append, EventsOfType, HistoryChanges

if TYPE_CHECKING:
    from actors.api._sessions import Sessions
    from runtime.plugins import LocationPlugins

__all__ = ["DEFAULT_MAX_TASKS", "DEFAULT_QUESTION_EVENTS", "SessionTools"]

DEFAULT_MAX_TASKS: Final = 4
_INTERRUPT_GRACE: Final = 10.0
_TODO: Final = "todo.updated"


class SessionTools:
    """Todos, questions, plan switches and subagent tasks of every session.

    Args:
        max_tasks: subagent tasks one session runs at once; further ``task`` calls wait
            for a slot.
        question_events: most question events read back to list pending questions.
    """

    def __init__(
        self, *, storage: StorageActor, execution: SessionExecution, now_ms: Callable[[], int],
        max_tasks: int = DEFAULT_MAX_TASKS, question_events: int = DEFAULT_QUESTION_EVENTS,
    ) -> None:  # fmt: skip
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self._storage = storage
        self._x = execution
        self._now = now_ms
        self._sessions: Sessions | None = None
        self.max_tasks = max_tasks
        self.questions = DurableQuestions(
            storage, now_ms, execution.ids, limit=question_events,
            closing=lambda: execution.closing,
        )  # fmt: skip
        config = execution.configuration
        self.commands = Commands(
            sessions=lambda: self.sessions, env=config.env if config is not None else None,
            run_blocking=execution.run_blocking, mcp=self._mcp_of, plugins=self._plugins_of,
        )  # fmt: skip
        """The commands of each Location, and running one in a session."""
        self._slots: dict[str, tuple[trio.Semaphore, int]] = {}
        self._running: dict[str, dict[str, int]] = {}
        """Children running under a task call, by parent (with how many calls run each)."""
        self.tasks_running = 0

    async def _mcp_of(self, directory: str) -> McpServers:
        """The MCP servers of the Location of *directory* (opened at first use)."""
        return (await self._x.location(directory)).mcp

    async def _plugins_of(self, directory: str) -> LocationPlugins:
        """The plugins of the Location of *directory* (opened at first use)."""
        return (await self._x.location(directory)).plugins

    def bind(self, sessions: Sessions) -> None:
        """Give the tools the session API (built after the execution they serve)."""
        self._sessions = sessions

    @property
    def sessions(self) -> Sessions:
        assert self._sessions is not None, "SessionTools.bind was not called"
        return self._sessions

    # -- routed tool I/O -----------------------------------------------------------------

    @asynccontextmanager
    async def route_io(self, session_id: str, io: ToolIO) -> AsyncIterator[None]:
        """While in this block, the session's file tools read and write text, and its
        shell tool runs commands, through *io* (an editor's buffers and terminals):
        ``ToolRegistry.route_io`` of the session's Location, opened first if need be. Its
        subagent children and other sessions stay local.

        Raises SessionNotFoundError. Cancellation while the Location opens routes nothing.
        """
        info = await self.sessions.get(session_id)
        location = await self._x.location(info.location.directory)
        with location.registry.route_io(session_id, io):
            yield

    # -- a session's own MCP servers ---------------------------------------------------------

    @asynccontextmanager
    async def mcp_servers(
        self, session_id: str, specs: Mapping[str, McpServerSpec]
    ) -> AsyncIterator[McpServers]:
        """While in this block, the MCP servers *specs* run as the session's own (an
        editor's): their tools join the session's provider turns, and no other session's,
        from the first turn after they connected (``McpServers.settled`` waits for that).
        On leaving, they are stopped (each bounded by ``stop_grace``; a local server's
        process group goes with it) and their tools withdrawn.

        Raises SessionNotFoundError. Cancellation while the Location opens starts nothing.
        """
        info = await self.sessions.get(session_id)
        location = await self._x.location(info.location.directory)
        servers = McpServers(
            location.directory, location.registry, specs=lambda: specs,
            data_dir=location.registry.env.data_dir, search=lambda: None,
            session_id=session_id,
        )  # fmt: skip
        servers.host = self._x.mcp_host
        servers.agent_of = location.agent
        async with trio.open_nursery() as nursery:
            await nursery.start(servers.run)
            own = location.session_mcp.setdefault(session_id, [])
            own.append(servers)
            try:
                yield servers
            finally:
                own.remove(servers)
                if not own and location.session_mcp.get(session_id) is own:
                    del location.session_mcp[session_id]
                nursery.cancel_scope.cancel()

    # -- todos --------------------------------------------------------------------------

    async def write_todos(self, session_id: str, todos: list[ev.Todo]) -> None:
        event = ev.TodoUpdated(timestamp=self._now(), session_id=session_id, todos=todos)
        await self._storage.write(Append(session_id=session_id, events=[event]))

    async def read_todos(self, session_id: str) -> list[ev.Todo]:
        stored = await self._storage.read(
            EventsOfType(types=[_TODO], session_id=session_id, limit=1)
        )
        if not stored:
            return []
        event = ev.decode_event(stored[-1].data)
        assert isinstance(event, ev.TodoUpdated)
        return event.todos

    async def todos(self, session_id: str) -> builtins.list[ev.Todo]:
        """The session's todo list. Raises SessionNotFoundError."""
        await self.sessions.get(session_id)
        return await self.read_todos(session_id)

    # -- questions ----------------------------------------------------------------------

    async def ask(
        self, session_id: str, questions: list[ev.QuestionInfo], tool: ev.QuestionTool
    ) -> list[list[str]]:
        return await self.questions.ask(session_id, questions, tool)

    async def pending_questions(self, session_id: str | None = None) -> list[ev.QuestionAsked]:
        """Pending questions of one session (every session's with None), oldest first.
        Raises SessionNotFoundError for an unknown session."""
        if session_id is not None:
            await self.sessions.get(session_id)
        return await self.questions.pending(session_id)

    async def reply_question(
        self, session_id: str | None, request_id: str, answers: list[list[str]]
    ) -> None:
        """Answer a pending question: the waiting tool call returns the answers (on this
        worker or, through the store, on the one driving the session). When the call
        that asked was closed without them (a crash cut it), they reach the model as a
        prompt (``actors.session._questions.late_answer``), admitted with the reply and woken
        here, or by the recovery that closes the call. A standing revert is committed
        first, as for any prompt.

        Raises:
            QuestionNotFoundError: no such pending question (in the session, if given).
            InvalidInputError: answers that do not fit the questions.
            StorageError: the answer's write failed (it may be recorded all the same).
        """
        asked = await self.questions.find(request_id, session_id)
        if await self.sessions.reverts.standing(asked.session_id):
            # A revert stands only in an idle session, where no call waits: the answers
            # can reach the model only as a prompt, and a prompt first commits the revert
            # (``session.revert.committed`` names the messages it drops for good).
            await self.sessions.reverts.commit(asked.session_id)
        _, late = await self.questions.reply(asked.session_id, request_id, answers)
        if late is not None:
            await self._x.wake(asked.session_id, late.admitted_seq)

    async def reject_question(self, session_id: str | None, request_id: str) -> None:
        """Reject a pending question: the waiting tool call fails as dismissed.
        Raises QuestionNotFoundError."""
        asked = await self.questions.find(request_id, session_id)
        await self.questions.reject(asked.session_id, request_id)

    # -- agents -------------------------------------------------------------------------

    async def switch_agent(self, session_id: str, agent: str) -> None:
        await self.sessions.switch_agent(session_id, agent)

    def subagents(self, directory: str) -> list[tuple[str, str]]:
        location = self._x.location_for(directory)
        return [
            (a.name, a.description or "")
            for a in location.agents.values()
            if a.mode in ("subagent", "all")
        ]

    async def run_task(self, ctx: ToolContext, task: TaskInput) -> TaskResult:
        """Run *task* in a child session of the caller's and wait until it is idle.

        A new child runs the chosen subagent; ``task_id`` continues an earlier child of
        the same session. At most ``max_tasks`` children of one session run at once.
        Cancellation (the parent interrupted) interrupts the child, bounded and shielded,
        and propagates. Raises ToolError for an unknown subagent or a foreign task id.
        """
        child = await self._child(ctx, task)
        semaphore = self._slot(ctx.session_id)
        try:
            async with semaphore:
                self.tasks_running += 1
                self._started(ctx.session_id, child)
                try:
                    await self.sessions.prompt(child, prompt=Prompt(text=task.prompt))
                    await self.sessions.wait_idle(child)
                except BaseException:
                    with trio.move_on_after(_INTERRUPT_GRACE, shield=True):
                        await self.sessions.interrupt(child)
                    raise
                finally:
                    self.tasks_running -= 1
                    self._ended(ctx.session_id, child)
        finally:
            self._release(ctx.session_id)
        return TaskResult(session_id=child, text=await self._answer(child))

    async def _child(self, ctx: ToolContext, task: TaskInput) -> str:
        location = await self._x.current_location(ctx.directory)
        agent = location.agents.get(task.subagent_type)
        if agent is None or agent.mode == "primary":
            known = ", ".join(name for name, _ in self.subagents(ctx.directory))
            raise ToolError(f"Unknown subagent {task.subagent_type!r}; available: {known}")
        if task.task_id is not None:
            try:
                info = await self.sessions.get(task.task_id)
            except SessionNotFoundError:
                raise ToolError(f"No task {task.task_id} to resume") from None
            if info.parent_id != ctx.session_id:
                raise ToolError(f"Task {task.task_id} is not a task of this session")
            return info.id
        info = await self.sessions.create(
            location=Location(directory=ctx.directory), agent=agent.name,
            parent_id=ctx.session_id, title=f"{task.description} (@{agent.name} subagent)",
        )  # fmt: skip
        return info.id

    def running_descendants(self, session_id: str) -> list[str]:
        """The child sessions running under the session's task calls, and theirs, depth
        first (whose permission requests surface to a watcher of the session)."""
        found: list[str] = []
        for child in self._running.get(session_id, {}):
            if child not in found:
                found += [child, *self.running_descendants(child)]
        return found

    def _started(self, parent: str, child: str) -> None:
        running = self._running.setdefault(parent, {})
        running[child] = running.get(child, 0) + 1

    def _ended(self, parent: str, child: str) -> None:
        running = self._running[parent]
        running[child] -= 1
        if not running[child]:
            del running[child]
        if not running:
            del self._running[parent]

    def _slot(self, session_id: str) -> trio.Semaphore:
        semaphore, users = self._slots.get(session_id) or (trio.Semaphore(self.max_tasks), 0)
        self._slots[session_id] = (semaphore, users + 1)
        return semaphore

    def _release(self, session_id: str) -> None:
        semaphore, users = self._slots[session_id]
        if users <= 1:
            del self._slots[session_id]
        else:
            self._slots[session_id] = (semaphore, users - 1)

    async def _answer(self, child: str) -> str:
        """The child's final answer: the text of its latest assistant message with text (read
        from the store's history cache, without waiting for the database). Raises ToolError
        when the latest assistant message failed."""
        delta = await self._storage.read(HistoryChanges(session_id=child, generation=-1, version=0))
        for _, message in reversed(delta.entries):
            if not isinstance(message, AssistantMessage):
                continue
            if isinstance(message.error, ev.SessionError):
                raise ToolError(f"The subagent failed: {message.error.message}")
            text = "".join(p.text for p in message.content if isinstance(p, m.AssistantText))
            if text:
                return text
        return ""
