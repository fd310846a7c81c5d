"""OpenCode's terminal UI under tmux against ``kittiwake serve``: sessions are not shared, so
the UI offers no ``/share`` or ``/unshare`` (it would call the share route and show a
``TypeError`` for its refusal), nothing typed there reaches the model, and the session goes
on. Every V1 event on ``/global/event`` is valid."""

from __future__ import annotations

import httpx

from .conftest import EventLog
from .harness import OPENCODE, Kittiwake, Tmux, client_env

_TYPE_ERROR = "undefined is not an object"


def test_share_is_not_offered_and_the_session_goes_on(kittiwake: Kittiwake, tmp_path):
    events = EventLog(kittiwake.url, "/global/event")
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", kittiwake.url], client_env(tmp_path))

    def shows(*texts: str) -> object:
        def check(screen: str) -> bool:
            assert _TYPE_ERROR not in screen, screen
            return all(t in screen for t in texts)

        return check

    try:
        ui.wait_for(shows("Ask anything", "Mock One"), 30, "the home screen")
        ui.type("share hello")
        ui.wait_for(shows("share hello"), 10, "the typed prompt")
        ui.keys("Enter")
        ui.wait_for(shows("Hello from the mock."), 30, "the answer")
        for command in ("/share", "/unshare"):
            ui.type(command)
            # the completion list settles on the commands matching what is typed
            screen = ui.wait_for(
                lambda s: "No matching items" in s or "Share session" in s or "Unshare" in s,
                10, f"the completion of {command}",
            )  # fmt: skip
            assert "No matching items" in screen, screen
            ui.keys("Enter")  # nothing to choose: nothing runs, nothing is sent
            ui.keys("C-u")
            ui.wait_for(
                lambda s, typed=command: shows()(s) and typed not in s and "No matching" not in s,
                10, "the emptied input",
            )  # fmt: skip
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
    [session] = httpx.get(kittiwake.url + "/session").json()
    assert "share" not in session
    messages = httpx.get(f"{kittiwake.url}/session/{session['id']}/message").json()
    prompts = [
        p["text"] for m in messages if m["info"]["role"] == "user" for p in m["parts"]
        if p["type"] == "text"
    ]  # fmt: skip
    assert prompts == ["share hello", "share again"]
