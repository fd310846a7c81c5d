"""The bot's trio side (``SlackBot``): what Slack delivers, turned into session work through
a ``gateway.acp`` ``Backend`` (a runtime in this process or a running server), and the
answers posted back through ``SlackWeb``.

Each Slack thread is one session (``ThreadMap``, on disk). A thread's messages are taken
one after another, in the order Slack delivered them; threads run side by side.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any, Final, Literal, cast

import msgspec
import trio
from slack_sdk.errors import SlackApiError

from actors import SessionEvent
from gateway.acp import Backend
from gateway.slack._asks import (
    ANSWER,
    ASK,
    DISMISS,
    answered_blocks,
    decode_pick,
    permission_blocks,
    permission_outcome,
    permission_text,
    question_blocks,
    question_text,
)
from gateway.slack._commands import Commands
from gateway.slack._link import Clicked, Commanded, Delivery, Said
from gateway.slack._render import WORKING, Answer
from gateway.slack._settings import SlackSettings
from gateway.slack._threads import Thread, ThreadMap, message_id, thread_key
from gateway.slack._web import LiveMessage, SlackWeb, live_message
from runtime import KittiwakeError, Prompt
from runtime import events as ev

__all__ = ["MAX_DEPTH", "REFUSAL", "SlackBot", "reason"]

_log = logging.getLogger("kittiwake.slack")
REFUSAL: Final = "Sorry, I can only work with the people and channels I was set up for."
_NOT_YOURS: Final = "Only <@{owner}> (who started this thread) can answer this."
_Reply = Literal["once", "always", "reject"]
_TASK: Final = "task"
_CUT: Final = (
    "_(the bot stopped while writing this; the session keeps what is above: reply to go on)_"
)
_LOST: Final = "_(the bot stopped while writing this, before any of it was kept: reply to go on)_"
_STILL: Final = "_(the bot stopped following this answer, which is still being written)_"
MAX_DEPTH: Final = 8
"""How many parents a request's session is followed up to the thread's session."""


def reason(exc: BaseException) -> str:
    """What *exc* says, a lone exception of a group unwrapped."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


class SlackBot:
    """Serves Slack's deliveries until cancelled.

    Args:
        backend: the session API (``EmbeddedBackend`` or ``AttachedBackend``).
        web: Slack's Web API.
        threads: the thread-to-session map.
        settings: who may use the bot, where sessions work, its limits.
    """

    def __init__(
        self, backend: Backend, web: SlackWeb, threads: ThreadMap, settings: SlackSettings
    ) -> None:
        self._backend = backend
        self._web = web
        self._threads = threads
        self._settings = settings
        self._queues: dict[str, list[Said]] = {}
        self._picks: dict[str, dict[int, str]] = {}
        self._commands = Commands(backend, web, threads, settings)

    async def serve(self, deliveries: trio.abc.ReceiveChannel[Delivery]) -> None:
        """Handle each delivery until the channel ends (then wait for the work it began)
        or the bot is cancelled. A delivery whose handling fails is answered with the
        failure in Slack (and logged); the others go on."""
        async with trio.open_nursery() as nursery:
            for thread in self._threads.streaming():
                nursery.start_soon(
                    self._guarded, self._recover, thread, thread.channel, thread.owner, thread.ts
                )
            async for item in deliveries:
                if isinstance(item, Said):
                    self._queue(item, nursery)
                elif isinstance(item, Clicked):
                    nursery.start_soon(self._guarded, self._clicked, item, item.channel, item.user)
                else:
                    nursery.start_soon(
                        self._guarded, self._commanded, item, item.channel, item.user
                    )

    def _queue(self, said: Said, nursery: trio.Nursery) -> None:
        key = thread_key(said.team, said.channel, said.thread)
        queue = self._queues.get(key)
        if queue is not None:
            queue.append(said)
            return
        self._queues[key] = [said]

        async def drain() -> None:
            try:
                while self._queues[key]:
                    item = self._queues[key][0]
                    await self._guarded(self._said, item, item.channel, item.user, item.thread)
                    self._queues[key].pop(0)
            finally:
                del self._queues[key]

        nursery.start_soon(drain)

    async def _guarded(
        self, handle: Callable[[Any], Awaitable[None]], item: Any, channel: str, user: str,
        thread: str | None = None,
    ) -> None:  # fmt: skip
        """Run *handle*; its failure (a refusal of the runtime or of Slack, a server out of
        reach, a fault) is logged and told to *user* in Slack, and the bot goes on.
        Cancellation is not caught."""
        try:
            await handle(item)
        except Exception as exc:
            expected = isinstance(exc, KittiwakeError | SlackApiError)
            _log.warning("handling %s failed: %s", type(item).__name__, exc, exc_info=not expected)
            try:
                await self._tell(channel, user, f":warning: {reason(exc)}", thread)
            except SlackApiError as again:
                _log.warning("could not tell %s: %s", user, again)

    async def _tell(self, channel: str, user: str, text: str, thread: str | None = None) -> None:
        """An ephemeral message to *user* (in *thread*)."""
        params: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread is not None:
            params["thread_ts"] = thread
        await self._web.call("chat.postEphemeral", **params)

    # -- conversations --------------------------------------------------------------------

    async def _said(self, said: Said) -> None:
        """Continue the thread's session with the message, or start one; the answer
        streams into one reply edited in place.

        The message is admitted under its ``message_id``, so a delivery again is an exact
        retry (no second turn, whether or not the map knew it was admitted); the map then
        records it taken, and a delivery again of a message the map has taken gets no
        second reply. A new thread is mapped before its first prompt, so a delivery again
        after a stop in between continues that session rather than starting another."""
        thread = self._threads.get(said.team, said.channel, said.thread)
        if thread is None and not said.starts:
            return  # a reply in a thread the bot does not hold: not for the bot
        if thread is not None and said.ts in thread.taken:
            _log.info("message %s of thread %s delivered again: taken already", said.ts, thread.ts)
            return  # Slack's retry of an event it thinks was lost: one reply only
        if not self._settings.admits(said.team, said.channel, said.user):
            await self._tell(said.channel, said.user, REFUSAL, said.thread)
            return
        if thread is None:
            info = await self._backend.create(self._settings.directory)
            thread = Thread(
                team=said.team, channel=said.channel, ts=said.thread, session_id=info.id,
                owner=said.user, used=int(time.time() * 1000),
            )  # fmt: skip
            await self._threads.put(thread)
        if not said.text:
            return
        posted = await self._web.call(
            "chat.postMessage", channel=said.channel, thread_ts=said.thread, text=WORKING
        )
        await self._answer(thread, str(posted["ts"]), said)

    async def _answer(self, thread: Thread, ts: str, said: Said) -> None:
        """Admit *said*'s prompt and stream the run's answer into the message *ts* until
        the session is idle; its permission requests and questions are posted beside it."""
        answer = Answer(max_text=self._settings.max_text)
        interval = self._settings.update_interval
        async with live_message(self._web, thread.channel, ts, interval) as live:
            try:
                await self._stream(thread, ts, answer, live, said)
            except Exception as exc:  # refused, or the server out of reach: said in place
                expected = isinstance(exc, KittiwakeError)
                _log.warning("answering in %s failed: %s", ts, exc, exc_info=not expected)
                live.show(f"{answer.text()}\n:warning: {reason(exc)}")
            else:
                live.show(answer.final())
        await self._threads.settle(thread, ts)

    async def _stream(
        self, thread: Thread, ts: str, answer: Answer, live: LiveMessage, said: Said
    ) -> None:
        """Admit *said*'s prompt under its message id (the map then says the message is
        taken and the answer streams into *ts*), and feed *answer* the run's events and
        deltas until the session is idle. For an exact retry that is the run the first
        admission started, from its prompt on."""
        session = thread.session_id
        async with self._backend.follow(session, None) as follow:
            msg = message_id(said.team, said.channel, said.ts)
            admitted = await self._backend.prompt(session, Prompt(text=said.text), id=msg)
            after = admitted.admitted_seq - 1
            took = thread.took(said.ts, int(time.time() * 1000))
            await self._threads.put(msgspec.structs.replace(took, reply=ts, after=after))
            # behind: an exact retry's run may have written its events before the follow
            idle = trio.Event()
            async with trio.open_nursery() as nursery:

                async def until_idle() -> None:
                    await self._backend.wait_idle(session)
                    idle.set()

                nursery.start_soon(until_idle)
                watching = False
                async with aclosing(follow.items(after, idle, behind=True)) as items:
                    async for item in items:
                        if isinstance(item, SessionEvent):
                            event = item.event
                            self._asked(thread, event, nursery)
                            if isinstance(event, ev.ToolCalled) and event.tool == _TASK:
                                if not watching:  # a subagent's requests are put here too
                                    watching = True
                                    nursery.start_soon(self._children, thread, nursery)
                        if answer.feed(item):
                            live.show(answer.text())
                nursery.cancel_scope.cancel()  # the children's requests: no longer watched

    async def _children(self, thread: Thread, nursery: trio.Nursery) -> None:
        """Post each pending permission request of the subagents running under the
        session's task calls, until cancelled."""
        asks = self._backend.descendant_asks(thread.session_id)
        async with aclosing(asks) as pending:
            async for info in pending:
                self._asked(thread, info, nursery)

    async def _recover(self, thread: Thread) -> None:
        """Finish the reply an earlier bot was streaming when it stopped: the answer as the
        session's history has it, and whether the run goes on unfollowed or was cut short
        (the session needs a resume: a crash of the runtime it ran in)."""
        assert thread.reply is not None
        answer = Answer(max_text=self._settings.max_text)
        cursor, more = thread.after, True
        while more:
            page, more = await self._backend.history(thread.session_id, cursor)
            for item in page:
                cursor = item.seq
                answer.feed(item)
        cut = (await self._backend.get(thread.session_id)).needs_resume is True
        if await self._backend.busy(thread.session_id):
            text = f"{answer.text()}\n{_STILL}"
        elif cut and answer.empty:  # the run was cut before any of it was kept
            text = _LOST
        elif cut:
            text = f"{answer.final()}\n{_CUT}"
        else:  # the run ended (a server went on with it, or it ended as the bot stopped)
            text = answer.final()
        await self._web.call("chat.update", channel=thread.channel, ts=thread.reply, text=text)
        await self._threads.settle(thread, thread.reply)

    def _asked(
        self, thread: Thread, event: ev.DurableEvent | ev.PermissionInfo, nursery: trio.Nursery
    ) -> None:
        if isinstance(event, ev.PermissionAsked | ev.PermissionInfo):
            text, blocks = permission_text(event), permission_blocks(event)
        elif isinstance(event, ev.QuestionAsked):
            text, blocks = question_text(event), question_blocks(event)
        else:
            return

        async def post() -> None:
            await self._web.call(
                "chat.postMessage", channel=thread.channel, thread_ts=thread.ts, text=text,
                blocks=blocks,
            )  # fmt: skip

        nursery.start_soon(self._guarded, lambda _: post(), None, thread.channel, thread.owner)

    # -- buttons --------------------------------------------------------------------------

    async def _clicked(self, click: Clicked) -> None:
        """Reply to the request the button names, durably, if the clicking user may: the
        thread's owner or one of ``answerers``; anyone else is told who may."""
        pick = decode_pick(click.value)
        thread = self._threads.get(click.team, click.channel, click.thread)
        if pick is None or thread is None or not await self._under(pick.session_id, thread):
            await self._tell(click.channel, click.user, "This request is not one of mine.")
            return
        allowed = self._settings.admits(click.team, click.channel, click.user) and (
            click.user == thread.owner or click.user in self._settings.answerers
        )
        if not allowed:
            await self._tell(click.channel, click.user, _NOT_YOURS.format(owner=thread.owner))
            return
        session, request = pick.session_id, pick.request_id
        if click.action.startswith(ASK):
            reply = cast(_Reply, click.action.removeprefix(ASK))
            if reply not in ("once", "always", "reject"):
                return
            await self._backend.reply_permission(session, request, reply)
            await self._settle(click, ":lock: permission", permission_outcome(reply))
        elif click.action == DISMISS:
            self._picks.pop(request, None)
            await self._backend.reject_question(session, request)
            await self._settle(click, ":question: question", "dismissed it")
        elif click.action.startswith(ANSWER):
            await self._answered(click, session, request, pick.question, pick.option)

    async def _under(self, session_id: str, thread: Thread) -> bool:
        """Whether *session_id* is the thread's session or a subagent's under it (its
        parents followed up to ``MAX_DEPTH``)."""
        for _ in range(MAX_DEPTH):
            if session_id == thread.session_id:
                return True
            parent = (await self._backend.get(session_id)).parent_id
            if not isinstance(parent, str):
                return False
            session_id = parent
        return False

    async def _answered(
        self, click: Clicked, session: str, request: str, question: int, option: int
    ) -> None:
        """One question's option picked; once every question of the request has one, the
        answers are the reply."""
        asked = await self._question(session, request)
        if asked is None or not 0 <= question < len(asked.questions):
            await self._tell(click.channel, click.user, "This question is answered already.")
            return
        options = asked.questions[question].options
        if not 0 <= option < len(options):
            return
        picks = self._picks.setdefault(request, {})
        picks[question] = options[option].label
        if len(picks) < len(asked.questions):
            return
        del self._picks[request]
        answers = [[picks[i]] for i in range(len(asked.questions))]
        await self._backend.reply_question(session, request, answers)
        await self._settle(click, ":question: question", "answered " + ", ".join(picks.values()))

    async def _question(self, session: str, request: str) -> ev.QuestionAsked | None:
        """The pending question *request* of *session* (its history read), else None."""
        cursor, more, found = 0, True, None
        while more:
            page, more = await self._backend.history(session, cursor)
            for item in page:
                cursor = item.seq
                event = item.event
                if isinstance(event, ev.QuestionAsked) and event.id == request:
                    found = event
                elif isinstance(event, ev.QuestionReplied | ev.QuestionRejected) and (
                    event.request_id == request
                ):
                    found = None
        return found

    async def _settle(self, click: Clicked, text: str, outcome: str) -> None:
        """The request's message without its buttons, saying who answered how."""
        await self._web.call(
            "chat.update", channel=click.channel, ts=click.message_ts, text=f"{text}: {outcome}",
            blocks=answered_blocks(text, click.user, outcome),
        )  # fmt: skip

    # -- /kw ------------------------------------------------------------------------------

    async def _commanded(self, command: Commanded) -> None:
        if not self._settings.admits(command.team, command.channel, command.user):
            await self._tell(command.channel, command.user, REFUSAL)
            return
        await self._commands.run(command)
