"""What ``kittiwake slack`` (and ``kittiwake serve --slack``) runs with: its tokens, Slack's Web API address, the directory its
sessions work in, who may use it, and its limits (``SlackSettings``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from runtime.config import SlackConfig

__all__ = ["DEFAULT_API_URL", "SettingsError", "SlackSettings", "settings_from"]

DEFAULT_API_URL: Final = "https://slack.com/api/"


class SettingsError(Exception):
    """A token or the signing secret is missing (the message names where it is looked for),
    or Slack refused the bot token or could not be reached (``open_slack_events``)."""


class SlackSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The bot's settings.

    Args:
        bot_token: the bot's ``xoxb-`` token (Web API calls).
        app_token: the app-level ``xapp-`` token (Socket Mode's ``apps.connections.open``;
            empty for the HTTP Events API).
        api_url: the Web API's base URL (ends with ``/``).
        directory: the directory new sessions work in.
        allowed_users, allowed_channels, allowed_teams: who may start or continue a session,
            answer a request or run ``/kw`` (an empty list admits everyone of that kind).
        answerers: users who may answer any thread's permission requests and questions,
            besides the user who started the thread.
        update_interval: seconds between two edits of one streamed message (Slack allows
            about one ``chat.update`` a second per message).
        max_retries: how many times one Web API call is retried after a 429.
        max_retry_after: the longest ``Retry-After`` (seconds) waited for; past it the call
            fails.
        max_pending: Slack deliveries (events, clicks, commands) queued for the sessions'
            side before a delivery waits for room.
        max_text: the most characters of an answer shown in one message (its tail is kept).
        ping_interval: seconds between the Socket Mode connection's pings, and between
            its checks: a connection found closed is reopened then at the latest.
        signing_secret: the app's signing secret, which Slack's HTTP requests are verified
            with (``X-Slack-Signature``); empty in Socket Mode.
    """

    bot_token: str
    app_token: str
    api_url: str = DEFAULT_API_URL
    directory: str
    allowed_users: frozenset[str] = frozenset()
    allowed_channels: frozenset[str] = frozenset()
    allowed_teams: frozenset[str] = frozenset()
    answerers: frozenset[str] = frozenset()
    update_interval: float = 1.0
    max_retries: int = 5
    max_retry_after: float = 120.0
    max_pending: int = 256
    max_text: int = 3500
    ping_interval: float = 10.0
    signing_secret: str = ""

    def admits(self, team: str | None, channel: str | None, user: str | None) -> bool:
        """Whether *user* in *channel* of workspace *team* may use the bot."""
        return (
            (not self.allowed_users or user in self.allowed_users)
            and (not self.allowed_channels or channel in self.allowed_channels)
            and (not self.allowed_teams or team in self.allowed_teams)
        )


def settings_from(
    config: SlackConfig | None, env: Mapping[str, str], directory: str, *, events: bool = False
) -> SlackSettings:
    """The settings of ``kittiwake.json``'s ``slack`` section (its values may be
    ``{env:NAME}``), the tokens else from ``SLACK_BOT_TOKEN`` and ``SLACK_APP_TOKEN``, the
    Web API at ``SLACK_API_URL`` else Slack's; sessions work in ``slack.directory``, else
    *directory*. With *events* (Slack's HTTP Events API) the app token is not needed but
    the signing secret is: ``slack.signingSecret``, else ``SLACK_SIGNING_SECRET``.

    Raises:
        SettingsError: a token (or, with *events*, the signing secret) is missing.
    """
    section = config or SlackConfig()
    bot = section.botToken or env.get("SLACK_BOT_TOKEN", "")
    app = section.appToken or env.get("SLACK_APP_TOKEN", "")
    secret = section.signingSecret or env.get("SLACK_SIGNING_SECRET", "")
    needed = [("bot token", bot, "SLACK_BOT_TOKEN", "botToken")]
    if events:
        needed.append(("signing secret", secret, "SLACK_SIGNING_SECRET", "signingSecret"))
    else:
        needed.append(("app token", app, "SLACK_APP_TOKEN", "appToken"))
    for name, value, variable, key in needed:
        if not value:
            raise SettingsError(f"no Slack {name}: set {variable} or slack.{key} in kittiwake.json")
    url = section.apiUrl or env.get("SLACK_API_URL") or DEFAULT_API_URL
    return SlackSettings(
        bot_token=bot, app_token=app, api_url=url if url.endswith("/") else url + "/",
        directory=section.directory or directory,
        allowed_users=frozenset(section.allowedUsers or ()),
        allowed_channels=frozenset(section.allowedChannels or ()),
        allowed_teams=frozenset(section.allowedTeams or ()),
        answerers=frozenset(section.answerers or ()),
        update_interval=section.updateInterval or 1.0,
        ping_interval=section.pingInterval or 10.0,
        signing_secret=secret if events else "",
    )  # fmt: skip
