"""The tools that act on the calling session: ``todowrite``/``todoread``, ``question``,
``plan_enter``/``plan_exit`` and ``task``, with OpenCode's names and input shapes.

Each handler works through an ``AgentToolHost`` (the runtime implements it over durable
storage); the definitions and the texts the model sees are here.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import msgspec

from runtime import events as ev
from runtime.llm import TextPart
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool

__all__ = [
    "AgentToolHost",
    "PLAN_EXIT_QUESTION",
    "QuestionDismissed",
    "QuestionInput",
    "TaskInput",
    "TaskResult",
    "TodoWriteInput",
    "session_tools",
    "task_description",
]


class QuestionDismissed(Exception):
    """The user rejected (dismissed) a question instead of answering it."""


class TaskResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a subagent's child session ended with."""

    session_id: str
    text: str


class TodoWriteInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    todos: list[ev.Todo]


class TodoReadInput(msgspec.Struct, frozen=True, kw_only=True):
    pass


class QuestionInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    questions: list[ev.QuestionInfo]


class PlanInput(msgspec.Struct, frozen=True, kw_only=True):
    pass


class TaskInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    description: str
    """A short (3-5 words) description of the task."""
    prompt: str
    """The task for the agent to perform."""
    subagent_type: str
    """The type of specialized agent to use for this task."""
    task_id: str | None = None
    """Set only to resume a previous task: the same subagent session continues."""
    command: str | None = None
    """The command that triggered this task."""


class AgentToolHost(Protocol):
    """What the session tools need of the runtime around them."""

    async def write_todos(self, session_id: str, todos: list[ev.Todo]) -> None:
        """Make *todos* the session's todo list, durably (``todo.updated``)."""
        ...

    async def read_todos(self, session_id: str) -> list[ev.Todo]:
        """The session's todo list (empty when never written)."""
        ...

    async def ask(
        self, session_id: str, questions: list[ev.QuestionInfo], tool: ev.QuestionTool
    ) -> list[list[str]]:
        """Record a durable question and wait for the user's answers (one list per
        question). Raises ``QuestionDismissed`` when the user rejects it. Cancellation
        records it as rejected and propagates."""
        ...

    async def switch_agent(self, session_id: str, agent: str) -> None:
        """Select *agent* for the session from its next provider turn on."""
        ...

    async def run_task(self, ctx: ToolContext, task: TaskInput) -> TaskResult:
        """Run *task* in a child session and wait for it to be idle. Raises ``ToolError``
        for a request that cannot run (unknown subagent, foreign task id). Cancellation
        interrupts the child and propagates."""
        ...


TODO_DESCRIPTION: Final = """\
Use this tool to create and manage a structured task list for the current session. It \
helps you track progress, organize complex tasks, and show the user how the work is going.

Use it for multi-step work (3 or more distinct steps), when the user gives several tasks, \
and to mark progress: set a task in_progress before starting it (one at a time) and \
completed as soon as it is done. Skip it for a single trivial task.

Each call replaces the whole list. Status: pending, in_progress, completed, cancelled. \
Priority: high, medium, low."""

TODOREAD_DESCRIPTION: Final = "Read the session's current todo list."

QUESTION_DESCRIPTION: Final = """\
Ask the user questions during execution: to gather preferences or requirements, clarify \
ambiguous instructions, or offer choices about direction. Each question has a short \
header (max 30 chars), the complete question, and options (label, description); set \
multiple to allow several choices. The user may also type their own answer unless \
custom is false. The call waits for the answers."""

PLAN_ENTER_DESCRIPTION: Final = (
    "Ask the user to switch to the plan agent (read-only analysis and planning) from the "
    "next turn on. Use it when the request needs a plan before any change is made."
)
PLAN_EXIT_DESCRIPTION: Final = (
    "Ask the user to approve the plan and switch to the build agent, which may edit files, "
    "from the next turn on. Call it once the plan is complete."
)
PLAN_EXIT_QUESTION: Final = (
    "The plan is complete. Would you like to switch to the build agent and start implementing?"
)
_PLAN_ENTER_QUESTION: Final = (
    "Would you like to switch to the plan agent to analyse and plan before changing anything?"
)

TASK_DESCRIPTION: Final = """\
Launch a subagent to handle a complex, multi-step task autonomously in its own child \
session. Give it a short description, a detailed prompt (it sees nothing of this \
conversation) and the subagent_type to use. The call returns the subagent's final answer \
and a task_id; pass that task_id in a later call to continue the same subagent session. \
Launch several at once when the tasks are independent.

Available subagents:"""


def _text(text: str, structured: Any = None) -> ToolOutput:
    return ToolOutput(content=[TextPart(text=text)], structured=structured)


def _todo_json(todos: list[ev.Todo]) -> str:
    return msgspec.json.format(msgspec.json.encode(todos), indent=2).decode()


def session_tools(host: AgentToolHost) -> list[Tool[Any]]:
    """``todowrite``, ``todoread``, ``question``, ``plan_enter``, ``plan_exit`` and ``task``
    over *host*."""

    async def todowrite(args: TodoWriteInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        await host.write_todos(ctx.session_id, args.todos)
        remaining = sum(1 for t in args.todos if t.status != "completed")
        return _text(_todo_json(args.todos), {"todos": msgspec.to_builtins(args.todos),
                                              "remaining": remaining})  # fmt: skip

    async def todoread(args: TodoReadInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        todos = await host.read_todos(ctx.session_id)
        return _text(_todo_json(todos), {"todos": msgspec.to_builtins(todos)})

    async def question(args: QuestionInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        if not args.questions:
            raise ToolError("Ask at least one question")
        tool = ev.QuestionTool(message_id=ctx.assistant_message_id, call_id=ctx.tool_call_id)
        try:
            answers = await host.ask(ctx.session_id, args.questions, tool)
        except QuestionDismissed:
            raise ToolError("The user dismissed this question") from None
        pairs = ", ".join(
            f'"{q.question}"="{", ".join(a) if a else "Unanswered"}"'
            for q, a in zip(args.questions, answers, strict=False)
        )
        text = (
            f"User has answered your questions: {pairs}. "
            "You can now continue with the user's answers in mind."
        )
        return _text(text, {"answers": answers})

    async def switch(ctx: ToolContext, target: str, ask: str) -> ToolOutput:
        yes = ev.QuestionOption(label="Yes", description=f"Switch to the {target} agent")
        no = ev.QuestionOption(label="No", description=f"Stay with the {ctx.agent} agent")
        info = ev.QuestionInfo(question=ask, header=f"{target.capitalize()} agent",
                               options=[yes, no], custom=False)  # fmt: skip
        tool = ev.QuestionTool(message_id=ctx.assistant_message_id, call_id=ctx.tool_call_id)
        try:
            answers = await host.ask(ctx.session_id, [info], tool)
        except QuestionDismissed:
            raise ToolError(f"The user dismissed switching to the {target} agent") from None
        if not answers or answers[0] != ["Yes"]:
            raise ToolError(f"The user declined switching to the {target} agent")
        await host.switch_agent(ctx.session_id, target)
        return _text(
            f"The user approved: the {target} agent takes over from the next turn.",
            {"agent": target},
        )

    async def plan_enter(args: PlanInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return await switch(ctx, "plan", _PLAN_ENTER_QUESTION)

    async def plan_exit(args: PlanInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        return await switch(ctx, "build", PLAN_EXIT_QUESTION)

    async def task(args: TaskInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        result = await host.run_task(ctx, args)
        text = (
            f"task_id: {result.session_id} (for resuming to continue this task if needed)\n\n"
            f"<task_result>\n{result.text}\n</task_result>"
        )
        return _text(text, {"sessionID": result.session_id})

    return [
        Tool(name="todowrite", description=TODO_DESCRIPTION, input_type=TodoWriteInput,
             handler=todowrite, permission="todowrite"),
        Tool(name="todoread", description=TODOREAD_DESCRIPTION, input_type=TodoReadInput,
             handler=todoread, permission="todoread"),
        Tool(name="question", description=QUESTION_DESCRIPTION, input_type=QuestionInput,
             handler=question, permission="question"),
        Tool(name="plan_enter", description=PLAN_ENTER_DESCRIPTION, input_type=PlanInput,
             handler=plan_enter, permission="plan_enter"),
        Tool(name="plan_exit", description=PLAN_EXIT_DESCRIPTION, input_type=PlanInput,
             handler=plan_exit, permission="plan_exit"),
        Tool(name="task", description=TASK_DESCRIPTION, input_type=TaskInput, handler=task,
             permission="task", resources=lambda args, env: [args.subagent_type]),
    ]  # fmt: skip


def task_description(subagents: list[tuple[str, str]]) -> str:
    """The ``task`` tool's description listing *subagents* (name, description)."""
    listed = "\n".join(f"- {name}: {text}" for name, text in subagents) or "- (none)"
    return f"{TASK_DESCRIPTION}\n{listed}"
