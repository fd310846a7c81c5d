"""Slack, played locally for ``kittiwake slack``: ``MockSlack`` answers the Web API on
``/api/<method>`` (recording each call; a method may be told to answer 429 with a
``Retry-After``) and serves Socket Mode's websocket on ``/link``, the URL its
``apps.connections.open`` gives; tests push events, clicks and commands down it.
``Signed`` sends the same as Slack's HTTP Events API does, signed, to a gateway's
``/slack/events`` (``kittiwake serve --slack``).

``Bot`` is a ``kittiwake slack`` child process pointed at it (``slack.apiUrl``), over a
data dir whose model catalog has the chat-completions mock (``tests.opencode.harness``)."""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from quart import request, websocket
from quart_trio import QuartTrio
from slack_sdk.signature import SignatureVerifier

from tests.editor_acp.harness import catalog
from tests.opencode.harness import Provider

TEAM = "T1"
BOT_USER = "UBOT"
SECRET = "8f742231b10e8888abcd99e1a2b3c4d5"
"""The Slack app's signing secret (``SLACK_SIGNING_SECRET`` of ``Setup``'s environment)."""


@dataclass
class Call:
    """One Web API call: its method and parameters, and whether it was refused (429)."""

    method: str
    params: dict[str, Any]
    limited: bool = False
    answer: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=trio.current_time)


@dataclass
class MockSlack:
    """Slack's Web API and Socket Mode endpoint on 127.0.0.1 (``serve`` starts it)."""

    calls: list[Call] = field(default_factory=list)
    limits: dict[str, list[float]] = field(default_factory=dict)
    """Per method, the ``Retry-After`` of each 429 its next calls answer."""
    acks: set[str] = field(default_factory=set)
    connections: int = 0
    port: int = 0
    changed: trio.Event = field(default_factory=trio.Event)
    _socket: trio.MemorySendChannel[str] | None = None
    _close: trio.Event | None = None
    _ts: Any = field(default_factory=lambda: itertools.count(1))
    _envelopes: Any = field(default_factory=lambda: itertools.count(1))

    def _touch(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait until *predicate* holds (checked after each call, ack or connection, and
        when a bot process ends); fail after 30 s."""
        with trio.fail_after(30):
            while not predicate():
                await self.changed.wait()

    def of(self, method: str, *, limited: bool = False) -> list[dict[str, Any]]:
        """The parameters of the calls of *method* answered (or refused, *limited*)."""
        return [c.params for c in self.calls if c.method == method and c.limited == limited]

    def posted(self) -> list[tuple[str, dict[str, Any]]]:
        """The messages posted (``chat.postMessage``): each one's ts and parameters."""
        return [(c.answer["ts"], c.params) for c in self.calls
                if c.method == "chat.postMessage" and not c.limited]  # fmt: skip

    def edits(self, ts: str) -> list[str]:
        """The texts the message *ts* was edited to, in order."""
        return [p["text"] for p in self.of("chat.update") if p.get("ts") == ts]

    def next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def app(self) -> QuartTrio:
        app = QuartTrio(__name__)

        @app.post("/api/<method>")
        async def api(method: str) -> Any:
            if request.mimetype == "application/json":
                params = dict(await request.get_json())
            else:
                params = dict((await request.form).items())
            pending = self.limits.get(method)
            if pending:
                retry = pending.pop(0)
                self.calls.append(Call(method, params, limited=True))
                self._touch()
                body = {"ok": False, "error": "ratelimited"}
                return body, 429, {"Retry-After": f"{retry:g}"}
            answer = self._answer(method, params)
            self.calls.append(Call(method, params, answer=answer))
            self._touch()
            return answer

        @app.websocket("/link")
        async def link() -> None:
            send, receive = trio.open_memory_channel[str](100)
            self._socket, self._close = send, trio.Event()
            self.connections += 1
            self._touch()
            await websocket.accept()
            await websocket.send(json.dumps({"type": "hello", "num_connections": 1}))
            close = self._close
            async with trio.open_nursery() as nursery:

                async def reading() -> None:
                    while True:
                        frame = json.loads(await websocket.receive())
                        if "envelope_id" in frame:
                            self.acks.add(frame["envelope_id"])
                            self._touch()

                async def writing() -> None:
                    async for frame in receive:
                        await websocket.send(frame)

                async def closing() -> None:
                    await close.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(reading)
                nursery.start_soon(writing)
                nursery.start_soon(closing)

        return app

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "user_id": BOT_USER, "bot_id": "BBOT", "team_id": TEAM,
                    "user": "kittiwake", "team": "Team", "url": "https://team.slack.test/"}  # fmt: skip
        if method == "apps.connections.open":
            return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"}
        if method == "chat.postMessage":
            return {"ok": True, "channel": params.get("channel"), "ts": self.next_ts()}
        if method == "chat.update":
            return {"ok": True, "channel": params.get("channel"), "ts": params.get("ts")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self.next_ts()}
        return {"ok": False, "error": "unknown_method"}

    def drop(self) -> None:
        """Close the current Socket Mode connection (the client is to reconnect)."""
        assert self._close is not None
        self._close.set()

    async def push(self, kind: str, payload: dict[str, Any]) -> str:
        """Send an envelope down the current connection; its id (acknowledged into
        ``acks``)."""
        await self.until(lambda: self._socket is not None)
        assert self._socket is not None
        envelope = f"env-{next(self._envelopes)}"
        frame = {"envelope_id": envelope, "type": kind, "payload": payload,
                 "accepts_response_payload": kind != "events_api"}  # fmt: skip
        await self._socket.send(json.dumps(frame))
        return envelope

    async def say(
        self, text: str, *, user: str = "U1", channel: str = "C1", thread: str | None = None,
        mention: bool = True, im: bool = False,
    ) -> str:  # fmt: skip
        """A user's message (a mention by default); its ts."""
        ts = self.next_ts()
        await self.push("events_api", said(text, ts, user=user, channel=channel, thread=thread,
                                           mention=mention, im=im))  # fmt: skip
        return ts

    async def click(
        self, action_id: str, value: str, message_ts: str, thread: str, *, user: str = "U1",
        channel: str = "C1",
    ) -> str:  # fmt: skip
        return await self.push(
            "interactive", clicked(action_id, value, message_ts, thread, user=user, channel=channel)
        )

    async def command(self, text: str, *, user: str = "U1", channel: str = "C1") -> str:
        return await self.push(
            "slash_commands", commanded(text, self.port, user=user, channel=channel)
        )


def said(
    text: str, ts: str, *, user: str = "U1", channel: str = "C1", thread: str | None = None,
    mention: bool = True, im: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """An Events API ``event_callback`` of a user's message *ts* (a mention by default)."""
    event: dict[str, Any] = {
        "type": "app_mention" if mention and not im else "message", "user": user,
        "text": f"<@{BOT_USER}> {text}" if mention else text, "ts": ts, "channel": channel,
        "event_ts": ts, "team": TEAM,
    }  # fmt: skip
    if im:
        event["channel_type"] = "im"
    if thread is not None:
        event["thread_ts"] = thread
    return {
        "token": "t", "team_id": TEAM, "api_app_id": "A1", "event": event,
        "type": "event_callback", "event_id": f"Ev{ts}", "event_time": 1700000000,
    }  # fmt: skip


def clicked(
    action_id: str, value: str, message_ts: str, thread: str, *, user: str = "U1",
    channel: str = "C1",
) -> dict[str, Any]:  # fmt: skip
    """A ``block_actions`` payload: *user* pressed a button of the message *message_ts*."""
    return {
        "type": "block_actions", "user": {"id": user, "team_id": TEAM}, "team": {"id": TEAM},
        "api_app_id": "A1", "channel": {"id": channel}, "trigger_id": "tr1",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
        "message": {"type": "message", "ts": message_ts, "thread_ts": thread, "text": ""},
        "actions": [{"action_id": action_id, "block_id": "b1", "value": value,
                     "type": "button", "action_ts": "1"}],
    }  # fmt: skip


def commanded(text: str, port: int, *, user: str = "U1", channel: str = "C1") -> dict[str, Any]:
    """A ``/kw <text>`` slash command's fields."""
    return {
        "token": "t", "team_id": TEAM, "channel_id": channel, "user_id": user,
        "command": "/kw", "text": text, "api_app_id": "A1", "trigger_id": "tr1",
        "response_url": f"http://127.0.0.1:{port}/respond",
    }  # fmt: skip


@dataclass
class Signed:
    """Slack's HTTP Events API: requests to the gateway at *client*'s ``/slack/events``,
    signed with *secret* (at the current time unless told), their ts from *slack*."""

    client: httpx.AsyncClient
    slack: MockSlack
    secret: str = SECRET

    async def post(
        self, body: bytes, content_type: str, *, at: float | None = None,
        secret: str | None = None, headers: dict[str, str] | None = None,
    ) -> httpx.Response:  # fmt: skip
        timestamp = str(int(time.time() if at is None else at))
        signer = SignatureVerifier(secret or self.secret)
        signature = signer.generate_signature(timestamp=timestamp, body=body) or ""
        sent = {"Content-Type": content_type, "X-Slack-Request-Timestamp": timestamp,
                "X-Slack-Signature": signature, **(headers or {})}  # fmt: skip
        return await self.client.post("/slack/events", content=body, headers=sent)

    async def event(self, payload: dict[str, Any], **kw: Any) -> httpx.Response:
        return await self.post(json.dumps(payload).encode(), "application/json", **kw)

    async def say(
        self, text: str, *, ts: str | None = None, retry: int | None = None, **kw: Any
    ) -> tuple[str, httpx.Response]:
        """A user's message (*ts*, else a new one), delivered again as retry *retry*; its
        ts and the answer."""
        ts = ts or self.slack.next_ts()
        headers = {} if retry is None else {
            "X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}  # fmt: skip
        return ts, await self.event(said(text, ts, **kw), headers=headers)

    async def click(self, *args: Any, **kw: Any) -> httpx.Response:
        body = httpx.QueryParams({"payload": json.dumps(clicked(*args, **kw))})
        return await self.post(str(body).encode(), "application/x-www-form-urlencoded")

    async def command(self, text: str, **kw: Any) -> httpx.Response:
        body = httpx.QueryParams(commanded(text, self.slack.port, **kw))
        return await self.post(str(body).encode(), "application/x-www-form-urlencoded")


@asynccontextmanager
async def mock_slack() -> AsyncIterator[MockSlack]:
    """A ``MockSlack`` served on a free loopback port until the block ends."""
    slack = MockSlack()
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 1.0
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            partial(hypercorn_serve, slack.app(), config, shutdown_trigger=stop.wait, mode="asgi")
        )
        slack.port = int(binds[0].rsplit(":", 1)[1])
        try:
            yield slack
        finally:
            if slack._close is not None:
                slack._close.set()
            stop.set()


class Setup:
    """A data dir whose catalog has the mock provider, and a project configured for Slack."""

    def __init__(
        self, tmp: Path, provider: Provider, mock: MockSlack, *, slack: dict[str, Any] | None = None,
        **config: Any,
    ) -> None:  # fmt: skip
        self.data = tmp / "data"
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        self.data.mkdir(exist_ok=True)
        (self.data / "models-dev.json").write_text(json.dumps(catalog(provider.port)))
        self.env = {**os.environ, "HOME": str(tmp), "KITTIWAKE_DATA_DIR": str(self.data)}
        for name in ("KITTIWAKE_SERVER_PASSWORD", "KITTIWAKE_LOG", "SLACK_API_URL"):
            self.env.pop(name, None)
        self.env |= {"LOCAL_API_KEY": "sk-local", "KITTIWAKE_MODEL": "local/m1",
                     "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_APP_TOKEN": "xapp-test",
                     "SLACK_SIGNING_SECRET": SECRET}  # fmt: skip
        slack_config = {
            "apiUrl": f"http://127.0.0.1:{mock.port}/api/",
            "updateInterval": 0.05,
            "pingInterval": 1.0,
        }
        slack_config |= slack or {}
        (self.project / "kittiwake.json").write_text(json.dumps({"slack": slack_config, **config}))

    def log(self) -> Any:
        """The bot's log file, opened to append to."""
        return open(self.data / "slack-bot.log", "ab")  # noqa: SIM115

    @property
    def threads(self) -> dict[str, Any]:
        """The thread map on disk, by thread key."""
        path = self.data / "slack" / "threads.json"
        if not path.exists():
            return {}
        return {
            f"{t['team']}/{t['channel']}/{t['ts']}": t
            for t in json.loads(path.read_text())["threads"]
        }


@asynccontextmanager
async def bot(setup: Setup, slack: MockSlack) -> AsyncIterator[trio.Process]:
    """``kittiwake slack`` in the project, once connected to *slack*; on exit interrupted
    (SIGINT) and waited for, killed if it does not end in 30 s."""
    connected = slack.connections
    log = setup.log()
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            partial(
                trio.run_process, [sys.executable, "-m", "gateway", "slack"], cwd=setup.project,
                env=setup.env, stdout=log, stderr=log, check=False,
            )
        )  # fmt: skip

        async def watch() -> None:
            await process.wait()
            slack._touch()

        nursery.start_soon(watch)
        try:
            await slack.until(lambda: slack.connections > connected or process.poll() is not None)
            assert process.poll() is None, (setup.data / "slack-bot.log").read_text()
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(2)
                with trio.move_on_after(30):
                    await process.wait()
                if process.poll() is None:
                    process.kill()
            log.close()
