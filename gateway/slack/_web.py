"""Slack's Web API from trio: ``SlackWeb`` calls it through ``slack_sdk``'s ``WebClient`` in a
worker thread, waiting out a 429's ``Retry-After`` on trio's clock; ``LiveMessage`` is one
message edited in place as an answer streams, throttled, its edits in order."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

__all__ = ["LiveMessage", "SlackWeb", "live_message"]

_log = logging.getLogger("kittiwake.slack")


class SlackWeb:
    """Web API calls with the bot's token.

    Args:
        client: the ``WebClient`` (its token and base URL).
        max_retries: how many times a call answered 429 is made again.
        max_retry_after: the longest ``Retry-After`` (seconds) waited for.
    """

    def __init__(self, client: WebClient, *, max_retries: int, max_retry_after: float) -> None:
        self.client = client
        self._max_retries = max_retries
        self._max_retry_after = max_retry_after

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Call *method* with *params* (a JSON body) and return its answer's data.

        A 429 is waited out (its ``Retry-After``, else one second) and the same call made
        again, up to ``max_retries`` times; calls made one after another therefore reach
        Slack in order, however late. Cancellation during a wait abandons the call; during
        a request it takes effect once the request ends (the worker thread is not stopped).

        Raises:
            SlackApiError: Slack refused the call (past the retries, for a 429).
        """
        retries = 0
        while True:
            try:
                response = await trio.to_thread.run_sync(
                    partial(self.client.api_call, method, json=params)
                )
            except SlackApiError as exc:
                wait = _retry_after(exc)
                if wait is None or retries >= self._max_retries or wait > self._max_retry_after:
                    raise
                retries += 1
                _log.info("%s rate limited: retrying in %.1f s", method, wait)
                await trio.sleep(wait)
                continue
            data = response.data
            return data if isinstance(data, dict) else {}


def _retry_after(exc: SlackApiError) -> float | None:
    """The seconds a 429 asks to wait (one without the header); None for another error."""
    if exc.response.status_code != 429:
        return None
    for name, value in (exc.response.headers or {}).items():
        if name.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except ValueError:
                return 1.0
    return 1.0


class LiveMessage:
    """A posted message that shows the latest of what it is given.

    ``show`` never waits: an edit (``chat.update``) is sent at most every *interval*
    seconds with the text given last, one edit at a time, so edits arrive in order and a
    text given while an edit waits (a 429) is not lost: the next edit carries it.
    """

    def __init__(self, web: SlackWeb, channel: str, ts: str, interval: float) -> None:
        self.channel = channel
        self.ts = ts
        self._web = web
        self._interval = interval
        self._wanted: tuple[str, tuple[Any, ...]] | None = None
        self._sent: tuple[str, tuple[Any, ...]] | None = None
        self._changed = trio.Event()
        self._closed = False

    def show(self, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """Make *text* (and *blocks*) the message's next content."""
        self._wanted = (text, tuple(blocks or ()))
        self._changed.set()

    def close(self) -> None:
        """Send what was given last, then stop."""
        self._closed = True
        self._changed.set()

    async def run(self) -> None:
        """Send edits until closed and everything given is sent. A refused edit is logged
        and the next one is tried (it carries everything)."""
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            wanted = self._wanted
            if wanted is not None and wanted != self._sent:
                text, blocks = wanted
                params: dict[str, Any] = {"channel": self.channel, "ts": self.ts, "text": text}
                if blocks:
                    params["blocks"] = list(blocks)
                try:
                    await self._web.call("chat.update", **params)
                except SlackApiError as exc:
                    _log.warning("chat.update of %s failed: %s", self.ts, exc)
                self._sent = wanted
            if self._closed and self._wanted == self._sent:
                return
            await trio.sleep(self._interval)
            if self._closed:
                self._changed.set()


@asynccontextmanager
async def live_message(
    web: SlackWeb, channel: str, ts: str, interval: float
) -> AsyncIterator[LiveMessage]:
    """A ``LiveMessage`` for the posted message *ts*; leaving the block waits for its last
    edit to be sent (cancellation abandons it)."""
    message = LiveMessage(web, channel, ts, interval)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(message.run)
        try:
            yield message
        finally:
            message.close()
