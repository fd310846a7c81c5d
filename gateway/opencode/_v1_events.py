"""OpenCode's V1 events, projected from the durable events and live deltas of the hub.

``V1Projection`` folds one subscriber's hub items into V1 payloads (``message.updated``,
``message.part.updated``, ``message.part.delta``, ``session.status``, ...). Part ids are the
ones ``GET /session/{id}/message`` answers (``gateway.http._opencode.part_id``), their indices
the gateway's one numbering (``gateway.opencode._v1_live.LiveAnswers``): the order in which each part
was first published (its first delta, else its durable start).

``StatusBoard`` tells the streams when a busy session turns idle: one waiter per busy
session offers an ``Idle`` marker into every V1 subscription, after the events that came
before it, and ``settled`` lets a blocking prompt return only once the streams sent it, and
``SETTLE_GRACE`` after the last one did.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, cast

import msgspec
import trio

from actors import Subscription
from gateway.http import (
    assistant_json,
    message_error,
    part_id,
    session_json,
    step_finish_json,
    tokens_json,
    tool_input_json,
    tool_name_json,
    tool_state_json,
    turn_agent_model,
    user_json,
)
from gateway.opencode._session_tools import question_json
from gateway.opencode._v1_live import LiveAnswers
from runtime import LiveDelta, SessionInfo, SessionNotFoundError
from runtime import events as ev
from runtime import messages as msg
from storage import StoredEvent

__all__ = ["Busy", "Idle", "Lookup", "Payload", "StatusBoard", "V1Projection", "payload"]

_log = logging.getLogger("kittiwake.gateway.v1")
_SHOWN: Final = 30_000
"""Characters of a running tool's output its part shows (the last ones), as OpenCode's."""
_REMEMBERED: Final = 256
SETTLE_GRACE: Final = 0.05
"""Seconds a blocking prompt's answer waits after the last V1 stream sent the session's idle
status. OpenCode's ``run --attach`` reads its stream and the answer on two connections and
exits once the answer is parsed; when both are readable in the same turn of its loop, it can
exit before handling the stream's last events and print nothing (anomalyco/opencode#46896).
The grace lets it read the stream first; only answers some stream was offered the idle
status of wait it."""
"""Assistant messages one projection keeps the parts of (least recently seen dropped)."""


class Idle(msgspec.Struct, frozen=True):
    """Offered into a V1 subscription when its session turned idle."""

    session_id: str


class Busy(msgspec.Struct, frozen=True):
    """Offered into a V1 subscription when its session turned busy without an event
    saying so (a user's shell command, recorded once it ends)."""

    session_id: str


@dataclass
class _Message:
    session_id: str
    info: dict[str, Any]
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Part by its content item id (text, reasoning or call id; ``step-start``)."""
    tools: dict[str, str] = field(default_factory=dict)
    """The runtime's tool name by call id."""


class Lookup:
    """What a projection reads from the runtime for an item it has no state for."""

    def __init__(
        self, session: Callable[[str], Awaitable[SessionInfo]],
        message: Callable[[str], Awaitable[tuple[str, msg.SessionMessage] | None]],
        last_user: Callable[[str], Awaitable[str | None]], default_model: Any,
        diff: Callable[[str], Awaitable[list[dict[str, Any]]]] | None = None,
    ) -> None:  # fmt: skip
        self.session = session
        self.message = message
        self.last_user = last_user
        self.default_model = default_model
        self.diff = diff
        """The session's ``SnapshotFileDiff`` list (``session.diff``), if served."""


Payload = dict[str, Any]


class V1Projection:
    """One V1 stream's projection state. ``feed`` answers the payloads (``{type,
    properties}``) an item becomes; it reads the runtime (through *lookup*) only for
    sessions and messages it has not seen; part indices from *live*. Raises what a lookup
    raises."""

    def __init__(
        self, lookup: Lookup, live: LiveAnswers, on_busy: Callable[[str], None], *, since: int
    ) -> None:
        self._lookup = lookup
        self._live = live
        self._since = since
        """When the subscription began (ms): a message created earlier may have parts this
        projection never saw start, so it is read from the store."""
        self._on_busy = on_busy
        self._messages: OrderedDict[str, _Message] = OrderedDict()
        self._users: dict[str, str] = {}
        self._busy: set[str] = set()
        self._retrying: set[str] = set()
        self._changed: set[str] = set()
        """Sessions whose file tools changed files in the step under way."""
        """Sessions whose last status sent was ``retry``: busy again at their next item."""

    def reset(self) -> None:
        """Forget everything (after the subscription overflowed)."""
        self._messages.clear()
        self._users.clear()

    async def feed(self, item: StoredEvent | LiveDelta | Idle | Busy) -> list[Payload]:
        if isinstance(item, Busy):
            out: list[Payload] = []
            self._busy_now(item.session_id, out)
            return out
        if isinstance(item, Idle):
            self._retrying.discard(item.session_id)
            if item.session_id not in self._busy:
                return []
            self._busy.discard(item.session_id)
            return [_status(item.session_id, "idle")]
        if isinstance(item, ev.Retried):
            return self._retry(item)
        sid = item.aggregate_id if isinstance(item, StoredEvent) else item.session_id
        again = [_status(sid, "busy")] if sid in self._retrying else []
        self._retrying.discard(sid)
        if isinstance(item, StoredEvent):
            return again + await self._durable(ev.decode_event(item.data))
        return again + await self._delta(item)

    def _retry(self, retried: ev.Retried) -> list[Payload]:
        """OpenCode's ``retry`` status: the attempt that failed, why, when the next starts."""
        out: list[Payload] = []
        self._busy_now(retried.session_id, out)
        self._retrying.add(retried.session_id)
        status = {
            "type": "retry", "attempt": retried.attempt, "message": retried.error.message,
            "next": retried.next,
        }  # fmt: skip
        out.append(payload("session.status", {"sessionID": retried.session_id, "status": status}))
        return out

    def _busy_now(self, session_id: str, out: list[Payload]) -> None:
        if session_id not in self._busy:
            self._busy.add(session_id)
            self._on_busy(session_id)
            out.append(_status(session_id, "busy"))

    async def _delta(self, delta: LiveDelta) -> list[Payload]:
        out: list[Payload] = []
        if isinstance(delta, ev.CompactionDelta | ev.Retried):
            return out  # the checkpoint shows once the compaction ends
        sid = delta.session_id
        message = await self._assistant(sid, delta.assistant_message_id, delta.timestamp, out)
        if isinstance(delta, ev.ToolInputDelta):
            return out  # numbered (``LiveAnswers``); announced with its name by tool.input.started
        if isinstance(delta, ev.ToolOutputDelta):
            running = message.parts.get(delta.call_id)
            if running is not None and running["state"]["status"] == "running":
                state = running["state"]
                shown = state.get("metadata", {}).get("output", "") + delta.delta
                state["metadata"] = {**state.get("metadata", {}), "output": shown[-_SHOWN:]}
                out.append(_part_updated(running, delta.timestamp))
            return out
        if isinstance(delta, ev.TextDelta):
            key, kind = delta.text_id, "text"
        else:
            key, kind = delta.reasoning_id, "reasoning"
        part = message.parts.get(key)
        if part is None:
            part = self._open_part(message, key, kind, delta.timestamp, out)
        if delta.delta:
            part["text"] += delta.delta
            out.append(payload("message.part.delta", {
                "sessionID": sid, "messageID": message.info["id"], "partID": part["id"],
                "field": "text", "delta": delta.delta,
            }))  # fmt: skip
        return out

    def _open_part(
        self, message: _Message, key: str, kind: str, now: int, out: list[Payload]
    ) -> dict[str, Any]:
        index = self._live.index(message.info["id"], key)
        part = {
            "id": part_id(message.info["id"], index), "sessionID": message.session_id,
            "messageID": message.info["id"], "type": kind, "text": "", "time": {"start": now},
        }  # fmt: skip
        message.parts[key] = part
        out.append(_part_updated(part, now))
        return part

    async def _assistant(self, sid: str, mid: str, now: int, out: list[Payload]) -> _Message:
        """The state of assistant message *mid*, announcing it when first seen."""
        self._busy_now(sid, out)
        known = self._messages.get(mid)
        if known is not None:
            self._messages.move_to_end(mid)
            return known
        info = await self._lookup.session(sid)
        stored = await self._lookup.message(mid) if _created_ms(mid) < self._since else None
        if stored is not None and isinstance(stored[1], msg.AssistantMessage):
            parent = self._users.get(sid) or await self._lookup.last_user(sid) or mid
            item = assistant_json(stored[1], info, parent)
            message = _Message(sid, item["info"])
            self._live.seed(mid, [content.id for content in stored[1].content])
            for content, part in zip(stored[1].content, item["parts"][1:], strict=False):
                message.parts[content.id] = part
        else:
            parent = self._users.get(sid) or await self._lookup.last_user(sid) or mid
            agent, model = turn_agent_model(info, self._lookup.default_model)
            placeholder = msg.AssistantMessage(
                id=mid, time=msg.MessageTime(created=now), agent=agent, model=model
            )
            item = assistant_json(placeholder, info, parent)
            message = _Message(sid, item["info"])
        message.parts["step-start"] = item["parts"][0]
        self._messages[mid] = message
        if len(self._messages) > _REMEMBERED:
            self._messages.popitem(last=False)
        out.append(payload("message.updated", {"sessionID": sid, "info": message.info}))
        for part in item["parts"]:
            out.append(_part_updated(part, now))
        return message

    async def _durable(self, e: ev.DurableEvent) -> list[Payload]:
        out: list[Payload] = []
        sid = e.session_id
        match e:
            case ev.SessionCreated(info=info):
                out.append(_session("session.created", info))
            case ev.SessionUpdated(info=info):
                out.append(_session("session.updated", info))
            case ev.SessionDeleted(info=info):
                out.append(_session("session.deleted", info))
            case ev.PromptPromoted():
                self._users[sid] = e.message_id
                self._busy_now(sid, out)
                info = await self._lookup.session(sid)
                user = msg.UserMessage(
                    id=e.message_id, time=msg.MessageTime(created=e.time_created),
                    text=e.prompt.text, files=e.prompt.files, agents=e.prompt.agents,
                )  # fmt: skip
                item = user_json(user, info, self._lookup.default_model)
                out.append(payload("message.updated", {"sessionID": sid, "info": item["info"]}))
                out.extend(_part_updated(part, e.timestamp) for part in item["parts"])
            case ev.StepStarted() | ev.TextStarted() | ev.ReasoningStarted():
                message = await self._assistant(sid, e.assistant_message_id, e.timestamp, out)
                if isinstance(e, ev.TextStarted) and e.text_id not in message.parts:
                    self._open_part(message, e.text_id, "text", e.timestamp, out)
                if isinstance(e, ev.ReasoningStarted) and e.reasoning_id not in message.parts:
                    self._open_part(message, e.reasoning_id, "reasoning", e.timestamp, out)
            case ev.TextEnded() | ev.ReasoningEnded():
                message = await self._assistant(sid, e.assistant_message_id, e.timestamp, out)
                key = e.text_id if isinstance(e, ev.TextEnded) else e.reasoning_id
                kind = "text" if isinstance(e, ev.TextEnded) else "reasoning"
                part = message.parts.get(key) or self._open_part(
                    message, key, kind, e.timestamp, out
                )
                part["text"] = e.text
                part["time"] = {"start": part["time"]["start"], "end": e.timestamp}
                out.append(_part_updated(part, e.timestamp))
            case ev.ToolInputStarted() | ev.ToolInputEnded() | ev.ToolCalled():
                message = await self._assistant(sid, e.assistant_message_id, e.timestamp, out)
                out.append(self._tool(message, e))
            case ev.ToolSuccess() | ev.ToolFailed():
                message = await self._assistant(sid, e.assistant_message_id, e.timestamp, out)
                out.append(self._tool(message, e))
            case ev.StepEnded() | ev.StepFailed():
                message = await self._assistant(sid, e.assistant_message_id, e.timestamp, out)
                self._end_step(message, e, out)
                if sid in self._changed and self._lookup.diff is not None:
                    self._changed.discard(sid)
                    diff = await self._lookup.diff(sid)
                    out.append(payload("session.diff", {"sessionID": sid, "diff": diff}))
            case ev.FileBeforeImage():
                self._changed.add(sid)
            case ev.RunFailed(error=error):
                out.append(payload("session.error", {
                    "sessionID": sid, "error": {"name": "UnknownError", "data": {"message": error.message}},
                }))  # fmt: skip
            case ev.PermissionAsked():
                asked: dict[str, Any] = {
                    "id": e.request_id, "sessionID": sid, "permission": e.permission,
                    "patterns": list(e.resources),
                    "metadata": e.metadata if isinstance(e.metadata, dict) else {},
                    "always": list(e.save) if isinstance(e.save, list) else [],
                }  # fmt: skip
                if isinstance(e.message_id, str):
                    asked["tool"] = {"messageID": e.message_id, "callID": e.call_id}
                out.append(payload("permission.asked", asked))
            case ev.TodoUpdated(todos=todos):
                out.append(payload("todo.updated", {
                    "sessionID": sid, "todos": msgspec.to_builtins(todos),
                }))  # fmt: skip
            case ev.QuestionAsked():
                out.append(payload("question.asked", question_json(e)))
            case ev.QuestionReplied(request_id=request_id, answers=answers):
                out.append(payload("question.replied", {
                    "sessionID": sid, "requestID": request_id, "answers": answers,
                }))  # fmt: skip
            case ev.QuestionRejected(request_id=request_id):
                out.append(payload("question.rejected", {
                    "sessionID": sid, "requestID": request_id,
                }))  # fmt: skip
            case ev.PermissionReplied():
                out.append(payload("permission.replied", {
                    "sessionID": sid, "requestID": e.request_id, "reply": e.reply,
                }))  # fmt: skip
            case ev.SessionReverted() | ev.SessionUnreverted() | ev.RevertCommitted():
                out.extend(await self._reverted(e))
            case _:
                pass
        return out

    async def _reverted(
        self, e: ev.SessionReverted | ev.SessionUnreverted | ev.RevertCommitted
    ) -> list[Payload]:
        """A revert's change: ``message.removed`` for each message it dropped for good, then
        ``session.updated`` with the session's ``revert`` as it is now; a revert or unrevert
        also changed files, so the session's diff follows (``session.diff``)."""
        out: list[Payload] = []
        sid = e.session_id
        if isinstance(e, ev.RevertCommitted):
            for message_id in e.message_ids:
                self._messages.pop(message_id, None)
                out.append(payload("message.removed", {"sessionID": sid, "messageID": message_id}))
        out.append(_session("session.updated", await self._lookup.session(sid)))
        if not isinstance(e, ev.RevertCommitted) and self._lookup.diff is not None:
            diff = await self._lookup.diff(sid)
            out.append(payload("session.diff", {"sessionID": sid, "diff": diff}))
        return out

    def _tool(self, message: _Message, e: Any) -> Payload:
        """The tool part of *e*'s call, updated to the state *e* moves it to."""
        part = message.parts.get(e.call_id)
        if part is None:
            index = self._live.index(message.info["id"], e.call_id)
            part = {
                "id": part_id(message.info["id"], index), "sessionID": message.session_id,
                "messageID": message.info["id"], "type": "tool", "callID": e.call_id,
                "tool": tool_name_json(str(getattr(e, "name", None) or getattr(e, "tool", ""))),
                "state": {"status": "pending", "input": {}, "raw": ""},
            }  # fmt: skip
            message.parts[e.call_id] = part
        state = part["state"]
        tool_name = message.tools.get(e.call_id, part["tool"])
        if isinstance(e, ev.ToolInputStarted):
            message.tools[e.call_id] = e.name
        if isinstance(e, ev.ToolInputEnded):
            part["state"] = {"status": "pending", "input": {}, "raw": e.text}
        elif isinstance(e, ev.ToolCalled):
            message.tools[e.call_id] = e.tool
            part["tool"] = tool_name_json(e.tool)
            given = tool_input_json(e.tool, e.input)
            part["state"] = {"status": "running", "input": given, "time": {"start": e.timestamp}}
        elif isinstance(e, ev.ToolSuccess | ev.ToolFailed):
            ran = state.get("time", {}).get("start", e.timestamp)
            input_ = state.get("input") if isinstance(state.get("input"), dict) else {}
            if isinstance(e, ev.ToolSuccess):
                done: msg.ToolState = msg.ToolCompleted(
                    input=input_, content=e.content, structured=e.structured
                )
            else:
                done = msg.ToolError(input=input_, content=[], structured={}, error=e.error)
            tool = msg.AssistantTool(
                id=e.call_id, name=tool_name, state=done,
                time=msg.ToolTime(created=ran, ran=ran, completed=e.timestamp),
            )  # fmt: skip
            part["state"] = tool_state_json(tool, ran, message.info["path"]["cwd"])
        return _part_updated(part, e.timestamp)

    def _end_step(self, message: _Message, e: Any, out: list[Payload]) -> None:
        info = message.info
        info["time"] = {"created": info["time"]["created"], "completed": e.timestamp}
        for part in message.parts.values():
            if part["type"] in ("text", "reasoning") and "end" not in part["time"]:
                part["time"] = {"start": part["time"]["start"], "end": e.timestamp}
                out.append(_part_updated(part, e.timestamp))
        if isinstance(e, ev.StepEnded):
            info["finish"] = e.finish
            info["cost"] = e.cost
            info["tokens"] = tokens_json(e.tokens)
            index = self._live.index(info["id"], "step-finish")
            finish = step_finish_json(
                info["id"], message.session_id, index, e.finish, e.cost, e.tokens
            )
            message.parts["step-finish"] = finish
            out.append(_part_updated(finish, e.timestamp))
            error = message_error(e.finish, msgspec.UNSET)
        else:
            error = message_error(None, e.error)
            out.append(payload("session.error", {"sessionID": message.session_id, "error": error}))
        if error is not None:
            info["error"] = error
        out.append(payload("message.updated", {"sessionID": message.session_id, "info": info}))


def _created_ms(message_id: str) -> int:
    """When a generated id was made (``runtime._ids``: 14 hex digits of ms and a 12-bit
    counter after the prefix); 0 for an id of another shape."""
    try:
        return int(message_id.split("_", 1)[1][:14], 16) >> 12
    except (IndexError, ValueError):
        return 0


def payload(kind: str, properties: dict[str, Any]) -> Payload:
    """An event as the V1 streams send it, before its id: ``{type, properties}``."""
    return {"type": kind, "properties": properties}


def _status(session_id: str, kind: str) -> Payload:
    return payload("session.status", {"sessionID": session_id, "status": {"type": kind}})


def _session(kind: str, info: SessionInfo) -> Payload:
    return payload(kind, {"sessionID": info.id, "info": session_json(info)})


def _part_updated(part: dict[str, Any], now: int) -> Payload:
    return payload("message.part.updated", {
        "sessionID": part["sessionID"], "part": dict(part), "time": now,
    })  # fmt: skip


# -- busy and idle --------------------------------------------------------------------------


class StatusBoard:
    """Which sessions the V1 streams consider busy, and the waiters that see them idle.

    ``busy(id)`` starts (once) a task in *nursery* waiting for the session to be idle; it
    then offers ``Idle`` to every V1 subscription. ``settled(id)`` waits until each
    subscription that was offered it has sent it on.
    """

    def __init__(
        self, wait_idle: Callable[[str], Awaitable[None]], nursery: Callable[[], trio.Nursery]
    ) -> None:
        self._wait_idle = wait_idle
        self._nursery = nursery
        self.waiting: set[str] = set()
        self._subs: set[Subscription] = set()
        self._undelivered: dict[str, set[Subscription]] = {}
        self._sent_at: dict[str, float] = {}
        """When the last stream sent each session's idle status (pruned after a second)."""
        self._changed = trio.Event()

    def _bump(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def add(self, sub: Subscription) -> None:
        self._subs.add(sub)

    def remove(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        for pending in self._undelivered.values():
            pending.discard(sub)
        self._bump()

    def announce(self, session_id: str) -> None:
        """Tell every V1 subscription *session_id* is busy (``Busy``); each stream then
        watches it (``busy``) until it is idle."""
        for sub in self._subs:
            sub.offer(cast(Any, Busy(session_id)))
        self.busy(session_id)

    def busy(self, session_id: str) -> None:
        """Watch *session_id* until it is idle (no-op while already watched)."""
        if session_id in self.waiting:
            return
        self.waiting.add(session_id)
        self._nursery().start_soon(self._watch, session_id)

    async def _watch(self, session_id: str) -> None:
        """Wait for idle, then offer ``Idle``; a deleted session counts as idle.
        Cancellation (server stopping) offers nothing."""
        try:
            await self._wait_idle(session_id)
        except SessionNotFoundError:
            pass
        except Exception:  # noqa: BLE001 - the streams still learn the session is idle
            _log.exception("idle wait failed", extra={"session": session_id})
        self.waiting.discard(session_id)
        self._undelivered[session_id] = set(self._subs)
        for sub in self._subs:
            sub.offer(cast(Any, Idle(session_id)))
        self._bump()

    def delivered(self, session_id: str, sub: Subscription) -> None:
        """*sub*'s stream sent the idle status of *session_id*."""
        pending = self._undelivered.get(session_id)
        if pending is not None:
            pending.discard(sub)
            if not pending:
                del self._undelivered[session_id]
                now = trio.current_time()
                for stale in [s for s, at in self._sent_at.items() if now - at > 1.0]:
                    del self._sent_at[stale]
                self._sent_at[session_id] = now
            self._bump()

    async def settled(self, session_id: str) -> None:
        """Return once no waiter for *session_id* runs, every stream offered its idle status
        sent it, and ``SETTLE_GRACE`` passed since the last did (callers bound the wait).
        Cancellation stops waiting."""
        while session_id in self.waiting or self._undelivered.get(session_id):
            await self._changed.wait()
        sent_at = self._sent_at.pop(session_id, None)
        if sent_at is not None:
            await trio.sleep_until(sent_at + SETTLE_GRACE)
