"""``kittiwake slack``: a Slack bot that brings durable sessions into Slack threads.

A client of the runtime's public API in a room of its own, and the only importer of
``slack_bolt`` and ``slack_sdk``: bolt's ``App`` on the SDK's Socket Mode client (or behind
the gateway's ``POST /slack/events``, Slack's HTTP Events API) runs in threads and hands
what Slack delivers to the trio side, which drives sessions through
``gateway.acp``'s ``Backend`` (a runtime in this process, or a running server) and calls
the Web API through the SDK's ``WebClient`` in worker threads. Each thread is one session,
the map kept on disk. See ``docs/slack.md``.
"""

from gateway.slack._bot import REFUSAL as REFUSAL
from gateway.slack._bot import SlackBot as SlackBot
from gateway.slack._events import EVENTS_PATH as EVENTS_PATH
from gateway.slack._events import SlackEvents as SlackEvents
from gateway.slack._events import signature_refusal as signature_refusal
from gateway.slack._serve import open_slack_events as open_slack_events
from gateway.slack._serve import serve_slack as serve_slack
from gateway.slack._settings import SettingsError as SettingsError
from gateway.slack._settings import SlackSettings as SlackSettings
from gateway.slack._settings import settings_from as settings_from
from gateway.slack._threads import Thread as Thread
from gateway.slack._threads import ThreadMap as ThreadMap
from gateway.slack._threads import message_id as message_id

__all__ = [
    "EVENTS_PATH",
    "REFUSAL",
    "SettingsError",
    "SlackBot",
    "SlackEvents",
    "SlackSettings",
    "Thread",
    "ThreadMap",
    "message_id",
    "open_slack_events",
    "serve_slack",
    "settings_from",
    "signature_refusal",
]
