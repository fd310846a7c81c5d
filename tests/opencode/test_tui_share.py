"""OpenCode's terminal UI under tmux against ``kittiwake serve``: ``/share`` shares the
session on this server (the link answers without the password and shows the session),
``/unshare`` takes the link away, and the session goes on. Every V1 event on
``/global/event`` is valid."""

from __future__ import annotations

import httpx

from .conftest import EventLog
from .harness import OPENCODE, Kittiwake, Tmux, client_env

_TYPE_ERROR = "undefined is not an object"


def test_share_and_unshare_from_the_terminal_ui(kittiwake: Kittiwake, tmp_path):
    events = EventLog(kittiwake.url, "/global/event")
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", kittiwake.url], client_env(tmp_path))

    def shows(*texts: str) -> object:
        def check(screen: str) -> bool:
            assert _TYPE_ERROR not in screen, screen
            return all(t in screen for t in texts)

        return check

    def session() -> dict:
        [only] = httpx.get(kittiwake.url + "/session").json()
        return dict(only)

    def run(command: str, item: str) -> str:
        ui.type(command)
        ui.wait_for(shows(item), 10, f"the completion of {command}")
        ui.keys("Enter")
        return ui.screen()

    try:
        ui.wait_for(shows("Ask anything", "Mock One"), 30, "the home screen")
        ui.type("share hello")
        ui.wait_for(shows("share hello"), 10, "the typed prompt")
        ui.keys("Enter")
        ui.wait_for(shows("Hello from the mock."), 30, "the answer")

        run("/share", "Share session")
        ui.wait_for(shows("Are you sure you want to share it?"), 10, "OpenCode's confirmation")
        ui.keys("Enter")
        ui.wait_for(lambda s: shows()(s) and "share" in session(), 10, "the session shared")
        url = session()["share"]["url"]
        assert url.startswith(kittiwake.url + "/s/")
        ui.wait_for(lambda s: shows()(s) and ("/s/" in s or "copied" in s.lower()), 10, "the link")
        opened = httpx.get(url + "api/session")  # no password needed, though none is set here
        assert opened.status_code == 200 and opened.json()["data"]["id"] == session()["id"]

        run("/unshare", "Unshare")
        ui.wait_for(lambda s: shows()(s) and "share" not in session(), 10, "the session unshared")
        assert httpx.get(url + "api/session").status_code == 404

        ui.type("share again")
        ui.wait_for(shows("share again"), 10, "the second prompt")
        ui.keys("Enter")
        ui.wait_for(
            lambda s: shows()(s) and s.count("Hello from the mock.") == 2, 30, "the second answer"
        )
        assert ui.alive()
    finally:
        ui.close()
        events.close()
    assert not events.invalid, events.invalid[:3]
    messages = httpx.get(f"{kittiwake.url}/session/{session()['id']}/message").json()
    prompts = [
        p["text"] for m in messages if m["info"]["role"] == "user" for p in m["parts"]
        if p["type"] == "text"
    ]  # fmt: skip
    assert prompts == ["share hello", "share again"]
