"""The Slack side: a ``slack_bolt`` ``App`` (``bolt_app``) on ``slack_sdk``'s built-in Socket
Mode client, which runs in its own threads (or, for the HTTP Events API, dispatching the
gateway's requests in worker threads: ``gateway.slack._events``). Each listener
acknowledges its delivery at once and hands it to the trio side as a ``Said``,
``Clicked`` or ``Commanded`` (``trio.from_thread``), waiting while the trio side's queue
is full."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import msgspec
import trio
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient

__all__ = ["Clicked", "Commanded", "Delivery", "Said", "bolt_app", "slack_link"]

_log = logging.getLogger("kittiwake.slack")


class Said(msgspec.Struct, frozen=True, kw_only=True):
    """A message for the bot: a mention, a direct message, or a reply in a thread.

    ``thread`` is the thread's root (the message itself when it starts one); ``text``
    has the bot's mention taken out."""

    team: str
    channel: str
    user: str
    text: str
    ts: str
    thread: str
    starts: bool
    """Whether the message may start a session (a mention or a direct message)."""


class Clicked(msgspec.Struct, frozen=True, kw_only=True):
    """A button of one of the bot's messages pressed."""

    team: str
    channel: str
    user: str
    action: str
    value: str
    message_ts: str
    thread: str


class Commanded(msgspec.Struct, frozen=True, kw_only=True):
    """``/kw <text>`` run in a channel."""

    team: str
    channel: str
    user: str
    text: str


Delivery = Said | Clicked | Commanded
ACTION_PREFIX = "kw_"


def _said(event: dict[str, Any], body: dict[str, Any], bot: str | None, starts: bool) -> Said:
    text = str(event.get("text", ""))
    if bot:
        text = text.replace(f"<@{bot}>", "")
    ts = str(event.get("ts", ""))
    return Said(
        team=str(body.get("team_id") or event.get("team", "")), channel=str(event.get("channel")),
        user=str(event.get("user", "")), text=text.strip(), ts=ts,
        thread=str(event.get("thread_ts") or ts), starts=starts,
    )  # fmt: skip


def bolt_app(
    client: WebClient, deliver: Callable[[Delivery], None], command: str,
    *, signing_secret: str | None = None,
) -> App:  # fmt: skip
    """The bolt app: its listeners pass what they receive to *deliver*, before the answer
    to Slack (``process_before_response``). Built in a worker thread: it calls
    ``auth.test`` (raising ``SlackApiError`` when Slack refuses the token).

    With *signing_secret* it serves HTTP requests whose signature its caller verified
    (``gateway.slack._events``), so bolt's own verification is off.
    """
    if signing_secret is None:
        app = App(client=client, process_before_response=True)
    else:
        app = App(
            client=client, process_before_response=True, signing_secret=signing_secret,
            request_verification_enabled=False,
        )  # fmt: skip

    @app.event("app_mention")
    def mentioned(event: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        deliver(_said(event, body, context.get("bot_user_id"), True))

    @app.event("message")
    def message(event: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        if event.get("subtype") or event.get("bot_id"):
            return  # edits, joins, other bots: nothing for a session
        bot = context.get("bot_user_id")
        direct = event.get("channel_type") == "im"
        if not direct and (
            not event.get("thread_ts") or (bot and f"<@{bot}>" in event.get("text", ""))
        ):
            return  # a mention is app_mention's; outside threads the bot is not spoken to
        deliver(_said(event, body, bot, direct))

    @app.action(re.compile(f"^{ACTION_PREFIX}"))
    def clicked(ack: Callable[[], None], body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        message = body.get("message") or {}
        ts = str(message.get("ts", ""))
        deliver(
            Clicked(
                team=str((body.get("team") or {}).get("id", "")),
                channel=str((body.get("channel") or {}).get("id", "")),
                user=str((body.get("user") or {}).get("id", "")),
                action=str(action.get("action_id", "")), value=str(action.get("value", "")),
                message_ts=ts, thread=str(message.get("thread_ts") or ts),
            )
        )  # fmt: skip

    @app.command(command)
    def commanded(ack: Callable[[], None], command: dict[str, Any]) -> None:
        ack()
        deliver(
            Commanded(
                team=str(command.get("team_id", "")), channel=str(command.get("channel_id", "")),
                user=str(command.get("user_id", "")), text=str(command.get("text", "")).strip(),
            )
        )  # fmt: skip

    return app


@asynccontextmanager
async def slack_link(
    client: WebClient,
    app_token: str,
    *,
    max_pending: int,
    ping_interval: float,
    command: str = "/kw",
) -> AsyncIterator[trio.MemoryReceiveChannel[Delivery]]:
    """Connect to Slack in Socket Mode and yield what it delivers, in the order its
    listeners hand it over. The client reconnects by itself after a dropped connection
    (``apps.connections.open`` again), at the latest at its next check (every
    *ping_interval* seconds). Leaving the block disconnects.

    Raises ``SlackApiError`` when ``auth.test`` or ``apps.connections.open`` refuses the
    tokens. A delivery that arrives while the trio side is ending is dropped (logged).
    """
    send, receive = trio.open_memory_channel[Delivery](max_pending)
    token = trio.lowlevel.current_trio_token()

    def deliver(item: Delivery) -> None:
        try:
            trio.from_thread.run(send.send, item, trio_token=token)
        except (trio.RunFinishedError, trio.ClosedResourceError, trio.BrokenResourceError):
            _log.warning("a Slack delivery arrived while the bot was stopping: dropped")

    app = await trio.to_thread.run_sync(partial(bolt_app, client, deliver, command))
    handler = SocketModeHandler(app, app_token, web_client=client, ping_interval=ping_interval)
    try:
        await trio.to_thread.run_sync(handler.connect)
        with receive:
            yield receive
    finally:
        send.close()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(handler.close)
