"""Slack's HTTP Events API behind the gateway (``kittiwake serve --slack``): ``POST
/slack/events`` takes Slack's signed requests (events, button clicks, slash commands),
checks their signature with ``slack_sdk``'s ``SignatureVerifier`` and dispatches them to the
same bolt app as Socket Mode (``bolt_app``) in a worker thread; its listeners hand them to
the ``SlackBot``, which the gateway runs while it serves."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from typing import Any, Final

import msgspec
import trio
from quart import Response, request
from quart_trio import QuartTrio
from slack_bolt import App, BoltRequest
from slack_sdk.signature import SignatureVerifier

from gateway.http import Answer, GatewayError, Room, RouteTable, gateway_of
from gateway.slack._bot import SlackBot
from gateway.slack._link import Delivery

__all__ = ["EVENTS_PATH", "Answered", "SlackEvents", "signature_refusal"]

_log = logging.getLogger("kittiwake.slack")
EVENTS_PATH: Final = "/slack/events"
"""Where Slack's requests are served: the app's Request URL for events, interactivity
and slash commands alike."""
_UNSIGNED: Final = (
    "not signed by Slack: X-Slack-Signature and X-Slack-Request-Timestamp are required"
)
_STALE: Final = (
    "X-Slack-Request-Timestamp is more than five minutes from this server's clock "
    "(a stale or replayed request)"
)
_FORGED: Final = (
    "X-Slack-Signature does not match the request's body and timestamp (not from Slack, "
    "or signed with another signing secret)"
)


class Answered(msgspec.Struct, frozen=True):
    """What the bolt app answered a request: its status, headers and body."""

    status: int
    headers: dict[str, str]
    body: bytes


def signature_refusal(
    verifier: SignatureVerifier, body: bytes, headers: Mapping[str, str]
) -> str | None:
    """Why Slack's request signature does not admit a request with *body* and *headers*
    (names in any case), or None when it does: ``verifier.is_valid`` decides; the signature
    it computes tells a stale timestamp from a wrong signature."""
    lowered = {name.lower(): value for name, value in headers.items()}
    timestamp = lowered.get("x-slack-request-timestamp", "")
    signature = lowered.get("x-slack-signature", "")
    if not timestamp or not signature:
        return _UNSIGNED
    if not timestamp.isascii() or not timestamp.isdigit():
        return f"X-Slack-Request-Timestamp is not a number of seconds: {timestamp!r}"
    if verifier.is_valid(body, timestamp, signature):
        return None
    expected = verifier.generate_signature(timestamp=timestamp, body=body) or ""
    return _STALE if hmac.compare_digest(expected, signature) else _FORGED


class SlackEvents:
    """Slack's HTTP requests for a ``SlackBot`` (``open_slack_events`` builds one).

    ``room`` installs ``POST /slack/events`` on the gateway (open without the gateway's
    password or tokens: Slack's signature is its credential) and the bot as a task of the
    gateway while it serves.

    Args:
        app: the bolt app (``bolt_app`` with the signing secret), whose listeners send to
            *send*.
        verifier: the signing secret's verifier.
        bot: the bot serving what the listeners deliver.
        send, receive: the channel from the listeners to the bot.
    """

    def __init__(
        self, app: App, verifier: SignatureVerifier, bot: SlackBot,
        send: trio.MemorySendChannel[Delivery], receive: trio.MemoryReceiveChannel[Delivery],
    ) -> None:  # fmt: skip
        self._app = app
        self._verifier = verifier
        self._bot = bot
        self._send = send
        self._receive = receive

    async def answer(self, body: bytes, headers: Mapping[str, str]) -> Answered:
        """Dispatch one request of Slack's to the bolt app, in a worker thread, once its
        signature admits it: ``url_verification``'s challenge is echoed, an event, click
        or command is handed to the bot (waiting while the bot's queue is full) and
        acknowledged. A delivery again (``X-Slack-Retry-Num``) is handed over too: the bot
        takes each message of a thread once.

        Raises:
            GatewayError: 401 ``UnauthorizedError``, the signature is missing, wrong or
                stale; nothing is dispatched.
        """
        refused = signature_refusal(self._verifier, body, headers)
        if refused is not None:
            _log.warning("refused a request to %s: %s", EVENTS_PATH, refused)
            raise GatewayError("UnauthorizedError", refused)
        lowered = {name.lower(): value for name, value in headers.items()}
        if "x-slack-retry-num" in lowered:
            _log.info(
                "Slack delivers again (retry %s: %s)", lowered["x-slack-retry-num"],
                lowered.get("x-slack-retry-reason", "no reason given"),
            )  # fmt: skip
        bolt = BoltRequest(body=body.decode("utf-8", errors="replace"), headers=dict(headers))
        response = await trio.to_thread.run_sync(self._app.dispatch, bolt)
        return Answered(response.status, response.first_headers(), response.body.encode())

    async def serve(self, stop: trio.Event) -> None:
        """Run the bot over what the requests deliver until *stop* is set; then cancel
        it (an answer being streamed is settled from the session's history at the next
        start, as after a crash) and refuse further deliveries (bolt answers them 500, so
        Slack delivers them again later)."""
        with self._receive:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._bot.serve, self._receive)
                await stop.wait()
                nursery.cancel_scope.cancel()

    def room(self) -> Room:
        """The installer of ``POST /slack/events`` and of the bot's task."""

        def install(table: RouteTable, app: QuartTrio) -> None:
            gateway_of(app).background.append(self.serve)

            @table.post(
                EVENTS_PATH, "slack.events",
                "Slack's Events API, interactivity and slash commands (signed by Slack)",
                answer=Answer(type=dict[str, Any]), errors=("UnauthorizedError",), public=True,
            )  # fmt: skip
            async def slack_events() -> Response:
                data = await request.get_data(cache=True, as_text=False)
                body = data if isinstance(data, bytes) else data.encode()
                answered = await self.answer(body, dict(request.headers.items()))
                headers = dict(answered.headers)
                media = headers.pop("content-type", None)
                return Response(
                    answered.body, status=answered.status, headers=headers, content_type=media
                )

        return install
