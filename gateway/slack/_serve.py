"""``serve_slack``: the bot assembled: Slack's Web API client, the thread map, the Socket
Mode link and the trio side that serves what it delivers."""

from __future__ import annotations

from pathlib import Path

import trio
from slack_sdk import WebClient

from gateway.acp import Backend
from gateway.slack._bot import SlackBot
from gateway.slack._link import slack_link
from gateway.slack._settings import SlackSettings
from gateway.slack._threads import ThreadMap
from gateway.slack._web import SlackWeb

__all__ = ["serve_slack"]

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
    client = WebClient(token=settings.bot_token, base_url=settings.api_url, timeout=REQUEST_TIMEOUT)
    web = SlackWeb(
        client, max_retries=settings.max_retries, max_retry_after=settings.max_retry_after
    )
    threads = await ThreadMap.open(threads_path)
    bot = SlackBot(backend, web, threads, settings)
    async with slack_link(
        client, settings.app_token, max_pending=settings.max_pending,
        ping_interval=settings.ping_interval,
    ) as items:  # fmt: skip
        task_status.started()
        await bot.serve(items)
