"""The runtime's side of the Location's MCP servers (``runtime.mcp.McpHost``): what the
servers' sessions record durably, the questions a server asks their users, and the
model a server samples."""

from __future__ import annotations

from collections.abc import Callable

from actors.session import DurableQuestions, SessionExecution, session_model
from actors.store import StorageActor
from runtime import events as ev
from runtime import llm
from runtime.history import to_llm_model
from runtime.mcp import McpCall
from runtime.tools import QuestionDismissed, ToolError, permit
from storage import Append, GetSession

__all__ = ["SAMPLING_PERMISSION", "McpSessionHost"]

SAMPLING_PERMISSION = "mcp_sampling"


class McpSessionHost:
    """Records, for every Location's MCP servers, what their sessions keep durably (the
    tools ``mcp_search`` found: ``session.mcp.tools.found``); asks their users the
    questions of a server's ``elicitation/create`` (the question tool's durable kind);
    and grants a server's ``sampling/createMessage`` the calling session's model."""

    def __init__(
        self, *, storage: StorageActor, execution: SessionExecution, questions: DurableQuestions,
        now_ms: Callable[[], int],
    ) -> None:  # fmt: skip
        self._storage = storage
        self._x = execution
        self._questions = questions
        self._now = now_ms

    async def tools_found(self, session_id: str, tools: list[str]) -> None:
        """Append ``session.mcp.tools.found`` and hand the session's actor its info with
        them (offered from its next provider turn). Raises StorageError when the write
        failed; cancellation leaves the write to finish or not."""
        event = ev.McpToolsFound(timestamp=self._now(), session_id=session_id, tools=tools)
        await self._storage.write(Append(session_id=session_id, events=[event]))
        info = await self._storage.read(GetSession(session_id=session_id))
        if info is not None:
            self._x.refresh_info(info)

    async def ask(self, call: McpCall, questions: list[ev.QuestionInfo]) -> list[list[str]] | None:
        """A durable question of the call's session, tied to the call (so a restart that
        closes the call brings a later answer to the model as a prompt); ``None`` when
        the user dismissed it. Cancellation propagates (see ``DurableQuestions.ask``)."""
        ctx = call.ctx
        tool = ev.QuestionTool(message_id=ctx.assistant_message_id, call_id=ctx.tool_call_id)
        try:
            return await self._questions.ask(ctx.session_id, questions, tool)
        except QuestionDismissed:
            return None

    async def sampling_model(
        self, call: McpCall, server: str
    ) -> tuple[llm.ModelRef, llm.LLMClient]:
        """The session's model and its client, once ``mcp_sampling`` on *server* is
        granted under the call's agent (its rules, saved approvals, else the user).

        Raises:
            ToolError: denied, rejected, or the session is gone.
        """
        ctx = call.ctx
        location = self._x.location_for(ctx.directory)
        agent = location.agent(ctx.agent)
        refused = await permit(
            location.registry, call.tool, SAMPLING_PERMISSION, [server], ctx, agent,
            self._x.permissions,
        )  # fmt: skip
        if refused is not None:
            raise ToolError(refused.error)
        info = self._x.known_info(ctx.session_id) or await self._storage.read(
            GetSession(session_id=ctx.session_id)
        )
        if info is None:
            raise ToolError(f"Session not found: {ctx.session_id}")
        model = session_model(info, agent, location.settings, self._x.default_model)
        return to_llm_model(model), self._x.client_for(location)
