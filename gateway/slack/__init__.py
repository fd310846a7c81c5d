"""``kittiwake slack``: a Slack bot that brings durable sessions into Slack threads.

A client of the runtime's public API in a room of its own, and the only importer of
``slack_bolt`` and ``slack_sdk``: bolt's ``App`` on the SDK's Socket Mode client runs in
threads and hands what Slack delivers to the trio side, which drives sessions through
``gateway.acp``'s ``Backend`` (a runtime in this process, or a running server) and calls
the Web API through the SDK's ``WebClient`` in worker threads. Each thread is one session,
the map kept on disk. See ``docs/slack.md``.
"""

from gateway.slack._bot import REFUSAL as REFUSAL
from gateway.slack._bot import SlackBot as SlackBot
from gateway.slack._serve import serve_slack as serve_slack
from gateway.slack._settings import SettingsError as SettingsError
from gateway.slack._settings import SlackSettings as SlackSettings
from gateway.slack._settings import settings_from as settings_from
from gateway.slack._threads import Thread as Thread
from gateway.slack._threads import ThreadMap as ThreadMap

__all__ = [
    "REFUSAL",
    "SettingsError",
    "SlackBot",
    "SlackSettings",
    "Thread",
    "ThreadMap",
    "serve_slack",
    "settings_from",
]
