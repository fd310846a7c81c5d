"""OpenCode's terminal UI across a crash: ``kill -9`` of ``kittiwake serve`` while the UI is
attached and an answer streams, a restart on the same port and data dir, the UI idle again
and prompting on its reconnected event stream; then the session list shows the earlier sessions and opening one shows its
history, read from the restarted server. Every V1 answer and event seen is valid."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.gateway.conftest import assert_valid, response_schema

from .conftest import EventLog
from .harness import OPENCODE, Kittiwake, Provider, Tmux, client_env


def _get(url: str, path: str, **params: str) -> Any:
    answer = httpx.get(url + path, params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    template = path if not path.startswith("/session/") else "/session/{sessionID}/message"
    assert_valid(body, response_schema(template, "get", 200))
    return body


def _wait_for_subscribers(url: str, count: int, timeout: float = 30.0) -> None:
    """Until the server's event hub has *count* subscribers (``GET /api/actors``)."""
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        seen = httpx.get(url + "/api/actors").json()["subscribers"]
        if seen >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{seen} event subscribers after {timeout} s, not {count}")


def test_the_ui_survives_kill_9_and_reopens_an_earlier_session(provider: Provider, tmp_path):
    served = Kittiwake(tmp_path / "server", provider).start()
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", served.url], client_env(tmp_path))
    events: EventLog | None = None

    def ask(text: str) -> None:
        ui.type(text)
        ui.wait_for(lambda s: text in s, 20, "the typed prompt")
        ui.keys("Enter")

    try:
        ui.wait_for(lambda s: "Ask anything" in s and "Mock One" in s, 60, "the home screen")
        ask("say hello first")
        ui.wait_for(lambda s: "Hello from the mock." in s, 40, "the first answer")
        ui.type("/new")
        ui.wait_for(lambda s: "New session" in s or "/new" in s, 20, "the /new command")
        ui.keys("Enter")
        ui.wait_for(lambda s: "Ask anything" in s and "say hello first" not in s, 20, "home")
        ask("second hello")
        ui.wait_for(lambda s: "Hello from the mock." in s, 40, "the second answer")
        second, first = _get(served.url, "/session", roots="true")

        ask("answer slow please")
        ui.wait_for(lambda s: "and slowly" in s, 40, "the slow answer streaming")
        served.kill()  # in the middle of the answer
        served.start()  # the same port and data dir
        events = EventLog(served.url, "/global/event")
        # This test's stream and the UI's, reconnected: OpenCode's UI retries its event
        # stream after 1, 2, 4, 8, 16 s (the delay doubles after each failed attempt), and
        # events sent before it is back are not replayed to it.
        _wait_for_subscribers(served.url, 2, timeout=75)
        # the session the crash cut short is idle again on the reconnected stream
        ui.wait_for(lambda s: "esc interrupt" not in s, 20, "the UI back to idle")
        ask("third hello")  # answered only through the UI's reconnected event stream
        shown = ui.wait_for(
            lambda s: "Hello from the mock." in s.partition("third hello")[2], 40, "its answer"
        )
        messages = _get(served.url, f"/session/{second['id']}/message")
        texts = [m["parts"][0]["text"] for m in messages if m["info"]["role"] == "user"]
        assert texts == ["second hello", "answer slow please", "third hello"], (shown, messages)

        ui.type("/sessions")
        ui.wait_for(lambda s: "Switch session" in s, 20, "the /sessions command")
        ui.keys("Enter")
        ui.wait_for(lambda s: first["title"] in s and second["title"] in s, 20, "both in the list")
        ui.type(first["title"].split()[-1])  # the search field: GET /session?search=
        ui.wait_for(lambda s: second["title"] not in s, 20, "the list narrowed to one")
        ui.keys("Enter")
        # Until the switch is drawn, the list (the first session's title) can be on screen over
        # the second session's history: the switch is done once that history is gone.
        ui.wait_for(
            lambda s: "say hello first" in s and "Hello from the mock." in s
            and "third hello" not in s, 20, "its history alone",
        )  # fmt: skip
    finally:
        ui.close()
        if events is not None:
            events.close()
        served.stop()
    assert events is not None and not events.invalid, events.invalid[:3]
    kinds = {p["type"] for p in events.payloads()}
    assert {"message.updated", "message.part.delta", "session.status"} <= kinds
