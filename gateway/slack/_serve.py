"""The bot assembled: Slack's Web API client, the thread map and the trio side, with the
Socket Mode link (``serve_slack``) or behind the gateway's ``POST /slack/events``
(``open_slack_events``)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import trio
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from gateway.acp import Backend
from gateway.slack._bot import SlackBot
from gateway.slack._events import SlackEvents
from gateway.slack._link import Delivery, bolt_app, slack_link
from gateway.slack._settings import SettingsError, SlackSettings
from gateway.slack._threads import ThreadMap
from gateway.slack._web import SlackWeb

__all__ = ["open_slack_events", "serve_slack"]

REQUEST_TIMEOUT = 30
"""Seconds one Web API request may take."""


async def serve_slack(
    backend: Backend, settings: SlackSettings, threads_path: Path,
    *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:  # fmt: skip
    """Serve Slack over *backend* until cancelled (started once connected to Slack), the
    thread-to-session map kept in *threads_path*.

    Raises ``SlackApiError`` when Slack refuses the tokens (``auth.test``,
    ``apps.connections.open``); ``msgspec.DecodeError`` for a map file that is not one.
    """
    client, bot = await _bot(backend, settings, threads_path)
    async with slack_link(
        client, settings.app_token, max_pending=settings.max_pending,
        ping_interval=settings.ping_interval,
    ) as items:  # fmt: skip
        task_status.started()
        await bot.serve(items)


async def open_slack_events(
    backend: Backend, settings: SlackSettings, threads_path: Path, *, command: str = "/kw"
) -> SlackEvents:
    """The bot over *backend* for Slack's HTTP Events API (``SlackEvents.room`` puts it on
    the gateway), the thread-to-session map kept in *threads_path*. Nothing is served
    yet; it checks the bot token (``auth.test``) and reads the map.

    Raises ``SettingsError`` when Slack refuses the bot token (``auth.test``) or cannot
    be reached; ``msgspec.DecodeError`` for a map file that is not one.
    """
    client, bot = await _bot(backend, settings, threads_path)
    send, receive = trio.open_memory_channel[Delivery](settings.max_pending)
    token = trio.lowlevel.current_trio_token()

    def deliver(item: Delivery) -> None:  # a bolt listener's, in a worker thread
        trio.from_thread.run(send.send, item, trio_token=token)

    try:
        app = await trio.to_thread.run_sync(
            partial(bolt_app, client, deliver, command, signing_secret=settings.signing_secret)
        )
    except BoltError as exc:  # auth.test refused the token
        raise SettingsError(f"Slack refused the bot token: {exc}") from None
    except OSError as exc:  # auth.test did not reach Slack (urllib's URLError included)
        raise SettingsError(f"cannot reach Slack's Web API at {settings.api_url}: {exc}") from None
    return SlackEvents(app, SignatureVerifier(settings.signing_secret), bot, send, receive)


async def _bot(
    backend: Backend, settings: SlackSettings, threads_path: Path
) -> tuple[WebClient, SlackBot]:
    client = WebClient(token=settings.bot_token, base_url=settings.api_url, timeout=REQUEST_TIMEOUT)
    web = SlackWeb(
        client, max_retries=settings.max_retries, max_retry_after=settings.max_retry_after
    )
    threads = await ThreadMap.open(threads_path)
    return client, SlackBot(backend, web, threads, settings)
