"""A shell command the user runs in a session (OpenCode's ``!cmd``): the session's own
``shell`` tool under the agent's permission rules, recorded as a user message and an
assistant step holding that one tool call, with no provider turn.

The record is written in one batch once the command settled, so the history never holds
a call without its result; a crash while the command runs leaves no record of it (its
side effects stay, as any shell's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from actors.session import INTERRUPTED_TOOL
from runtime import IdGenerator, ModelRef, Prompt, llm
from runtime import events as ev
from runtime.agents import resolve_agent
from runtime.tools import ToolContext, ToolFailure, ToolSettlement
from storage import Append

if TYPE_CHECKING:
    from collections.abc import Callable

    from actors._runtime import Runtime

__all__ = ["USER_SHELL_TEXT", "run_user_shell"]

USER_SHELL_TEXT: Final = "The following tool was executed by the user"
"""The user message's text, as OpenCode writes it."""
_SHELL: Final = "shell"


def _result(base: dict[str, Any], settlement: ToolSettlement) -> ev.DurableEvent:
    if isinstance(settlement, ToolFailure):
        return ev.ToolFailed(**base, error=ev.SessionError(message=settlement.error))
    content: list[ev.ToolContent] = [
        ev.ToolFileContent(uri=p.url, mime=p.mime) if isinstance(p, llm.FilePart)
        else ev.ToolTextContent(text=p.text)
        for p in settlement.content
    ]  # fmt: skip
    structured = settlement.structured if isinstance(settlement.structured, dict) else {}
    return ev.ToolSuccess(
        **base, content=content, structured=structured, output_paths=settlement.output_paths
    )


async def run_user_shell(
    rt: Runtime, session_id: str, command: str, *, agent: str | None, model: ModelRef | None,
    ids: IdGenerator, now: Callable[[], int],
) -> tuple[str, str]:  # fmt: skip
    """Run *command* with the session's shell tool as agent *agent* (default: the
    session's) and record it; ``(user message id, assistant message id)``.

    The agent's rules decide the call (an ``ask`` rule waits for a reply like a model's
    call). Raises ``SessionNotFoundError``. Cancellation stops the command; its record,
    failed "Tool execution interrupted", is still written (bounded shield), then the
    cancellation propagates: the session and Location lookups before the call are
    shielded, so a cancellation that comes during them is delivered to the call and
    recorded too.
    """
    with trio.CancelScope(shield=True):  # two reads: the record needs what they answer
        info = await rt.sessions.get(session_id)
        location = await rt.execution.current_location(info.location.directory)
    chosen = agent if agent is not None else (info.agent if isinstance(info.agent, str) else None)
    agent_info = resolve_agent(location.agents, chosen)
    ran_model = model or (info.model if isinstance(info.model, ModelRef) else None)
    ran_model = ran_model or rt.execution.default_model
    user_id, assistant_id, call_id = ids.new("msg"), ids.new("msg"), ids.new("call")
    started = now()
    call = {"command": command, "description": command}
    ctx = ToolContext(
        session_id=session_id, agent=agent_info.name, assistant_message_id=assistant_id,
        tool_call_id=call_id, directory=info.location.directory,
    )  # fmt: skip
    settlement: ToolSettlement = ToolFailure(error=INTERRUPTED_TOOL)
    try:
        await location.plugins.wait_settled()  # their shell_env and tool hooks apply
        settlement = await location.registry.settle(
            _SHELL, call, ctx, agent=agent_info, permissions=rt.execution.permissions
        )
    finally:
        ended = now()
        base: dict[str, Any] = {"session_id": session_id}
        step: dict[str, Any] = {**base, "assistant_message_id": assistant_id}
        prompt = Prompt(text=USER_SHELL_TEXT)
        events: list[ev.DurableEvent] = [
            ev.PromptAdmitted(**base, timestamp=started, message_id=user_id, prompt=prompt,
                              delivery="queue"),
            ev.PromptPromoted(**base, timestamp=started, message_id=user_id, prompt=prompt,
                              time_created=started),
            ev.StepStarted(**step, timestamp=started, agent=agent_info.name, model=ran_model),
            ev.ToolCalled(**step, timestamp=started, call_id=call_id, tool=_SHELL, input=call),
            _result({**step, "timestamp": ended, "call_id": call_id}, settlement),
            ev.StepEnded(**step, timestamp=ended, finish="stop"),
        ]  # fmt: skip
        with trio.move_on_after(10, shield=True):
            await rt.storage.write(Append(session_id=session_id, events=events))
    return user_id, assistant_id
