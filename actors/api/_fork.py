"""Forking a session: a new session whose history is a copy of another's before a message.

``fork_events`` is pure: the durable events that rebuild a chronological history in a new
session, every message under a new id. ``fork_session`` reads the source's history and
writes the new session with those events in one batch (``storage.ForkSession``), so a
fork exists whole or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from msgspec import UNSET

from actors.session import INTERRUPTED_TOOL
from runtime import IdGenerator, InvalidInputError, SessionInfo, SessionMessage
from runtime import events as ev
from runtime import messages as msg
from storage import ForkSession, History

if TYPE_CHECKING:
    from actors._runtime import Runtime

__all__ = ["fork_events", "fork_session", "fork_title"]

_FORKED: Final = re.compile(r"^(.+) \(fork #(\d+)\)$")


def fork_title(title: str) -> str:
    """OpenCode's title of a fork: ``T (fork #1)``, then ``T (fork #2)`` for a fork's fork."""
    found = _FORKED.match(title)
    if found is None:
        return f"{title} (fork #1)"
    return f"{found.group(1)} (fork #{int(found.group(2)) + 1})"


def _provider(tool: msg.AssistantTool) -> ev.ToolProvider:
    p = tool.provider
    if p is UNSET:
        return ev.ToolProvider()
    return ev.ToolProvider(executed=p.executed, metadata=p.metadata)


def _tool_events(base: dict[str, Any], tool: msg.AssistantTool, end: int) -> list[ev.DurableEvent]:
    """The events of one tool call; one left running settles "Tool execution interrupted"."""
    state, call = tool.state, {**base, "call_id": tool.id}
    if isinstance(state, msg.ToolPending):
        return [
            ev.ToolInputStarted(**call, name=tool.name),
            ev.ToolInputEnded(**call, text=state.input),
        ]
    called = ev.ToolCalled(**call, tool=tool.name, input=state.input, provider=_provider(tool))
    done = {**call, "timestamp": tool.time.completed or end, "provider": _provider(tool)}
    if isinstance(state, msg.ToolCompleted):
        return [called, ev.ToolSuccess(
            **done, content=state.content, structured=state.structured,
            output_paths=state.output_paths, result=state.result,
        )]  # fmt: skip
    if isinstance(state, msg.ToolError):
        return [called, ev.ToolFailed(**done, error=state.error, result=state.result)]
    return [called, ev.ToolFailed(**done, error=ev.SessionError(message=INTERRUPTED_TOOL))]


def _assistant_events(
    m: msg.AssistantMessage, base: dict[str, Any], pruned: list[tuple[str, str]]
) -> list[ev.DurableEvent]:
    end = m.time.completed if isinstance(m.time.completed, int) else m.time.created
    out: list[ev.DurableEvent] = [ev.StepStarted(**base, agent=m.agent, model=m.model)]
    for item in m.content:
        if isinstance(item, msg.AssistantText):
            out += [ev.TextStarted(**base, text_id=item.id),
                    ev.TextEnded(**base, text_id=item.id, text=item.text)]  # fmt: skip
        elif isinstance(item, msg.AssistantReasoning):
            meta = item.provider_metadata
            out += [ev.ReasoningStarted(**base, reasoning_id=item.id, provider_metadata=meta),
                    ev.ReasoningEnded(**base, reasoning_id=item.id, text=item.text,
                                      provider_metadata=meta)]  # fmt: skip
        else:
            out += _tool_events(base, item, end)
            if item.time.pruned is not UNSET:
                pruned.append((base["assistant_message_id"], item.id))
    closing = {**base, "timestamp": end}
    if isinstance(m.error, ev.SessionError):
        out.append(ev.StepFailed(**closing, error=m.error))
    else:
        finish = m.finish if isinstance(m.finish, str) else "interrupted"
        cost = m.cost if isinstance(m.cost, float) else 0.0
        tokens = m.tokens if isinstance(m.tokens, ev.TokenUsage) else ev.TokenUsage()
        out.append(ev.StepEnded(**closing, finish=finish, cost=cost, tokens=tokens))
    return out


def fork_events(
    rows: Sequence[tuple[int, SessionMessage]], session_id: str, new_id: Callable[[], str]
) -> list[ev.DurableEvent]:
    """The events rebuilding *rows* (chronological ``(seq, message)``) in the new session
    *session_id*, appended right after its ``session.created`` (seq 0): every message under
    a new id from *new_id*; an assistant step left open ends ``interrupted`` (its running
    tools fail "Tool execution interrupted"), as recovery closes one; a compaction
    checkpoint keeps its boundary (mapped to the copied messages' seqs); pruned results stay
    pruned. Mid-conversation system messages are left out: the fork's first Context Epoch
    carries the context afresh."""
    out: list[ev.DurableEvent] = []
    seqs: dict[int, int] = {}  # old creating seq -> new
    pruned: list[tuple[str, str]] = []
    for seq, m in rows:
        mid = new_id()
        base: dict[str, Any] = {"timestamp": m.time.created, "session_id": session_id}
        first = len(out)
        match m:
            case msg.UserMessage():
                prompt = ev.Prompt(text=m.text, files=m.files, agents=m.agents)
                out += [
                    ev.PromptAdmitted(**base, message_id=mid, prompt=prompt, delivery="queue"),
                    ev.PromptPromoted(
                        **base, message_id=mid, prompt=prompt, time_created=m.time.created
                    ),  # fmt: skip
                ]
                first += 1
            case msg.AssistantMessage():
                out += _assistant_events(m, {**base, "assistant_message_id": mid}, pruned)
            case msg.CompactionMessage():
                old = m.metadata.boundary_seq
                boundary = max((new for o, new in seqs.items() if o <= old), default=-1)
                out.append(ev.CompactionEnded(
                    **base, message_id=mid, reason=m.reason, text=m.summary, recent=m.recent,
                    boundary_seq=boundary,
                ))  # fmt: skip
            case msg.SyntheticMessage():
                out.append(ev.Synthetic(**base, message_id=mid, text=m.text))
            case msg.AgentSwitchedMessage():
                out.append(ev.AgentSwitched(**base, message_id=mid, agent=m.agent))
            case msg.ModelSwitchedMessage():
                out.append(ev.ModelSwitched(**base, message_id=mid, model=m.model))
            case _:
                continue
        seqs[seq] = first + 1
    if pruned:
        stamp = max((m.time.created for _, m in rows), default=0)
        out.append(ev.ToolResultsPruned(timestamp=stamp, session_id=session_id, calls=pruned))
    return out


async def fork_session(
    rt: Runtime, session_id: str, *, before: str | None, max_messages: int,
    ids: IdGenerator, now: int,
) -> SessionInfo:  # fmt: skip
    """Create a session with a copy of *session_id*'s history before message *before*
    (all of it when None), durably in one batch; its title is ``fork_title``'s, its
    Location, agent, model and the MCP tools its searches found the source's, and it has
    no parent.

    Raises ``SessionNotFoundError``; ``InvalidInputError`` when *before* is not one of
    the session's messages or the copy would hold more than *max_messages*.
    Cancellation abandons the wait; the fork may still be written.
    """
    source = await rt.sessions.get(session_id)
    rows = await rt.storage.read(History(session_id=session_id))
    if before is not None:
        at = next((n for n, (_, m) in enumerate(rows) if m.id == before), None)
        if at is None:
            raise InvalidInputError(f"Message not found in {session_id}: {before}")
        rows = rows[:at]
    if len(rows) > max_messages:
        raise InvalidInputError(f"A fork copies at most {max_messages} messages")
    fork_id = ids.new("ses")
    info = SessionInfo(
        id=fork_id, project_id=source.project_id, location=source.location,
        title=fork_title(source.title), time=ev.SessionTime(created=now, updated=now),
        agent=source.agent, model=source.model, mcp_tools=source.mcp_tools,
    )  # fmt: skip
    events = fork_events(rows, fork_id, lambda: ids.new("msg"))
    return await rt.storage.write(ForkSession(info=info, events=events))
