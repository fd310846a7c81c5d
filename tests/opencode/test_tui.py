"""OpenCode's terminal UI (``opencode attach``) under tmux against ``kittiwake serve``: the
home screen, a new session's first answer streaming and Esc Esc aborting it, a streamed
answer, a completed tool call, a permission prompt answered "allow once"; every V1 event on
``/global/event`` is valid."""

from __future__ import annotations

from .conftest import EventLog
from .harness import OPENCODE, Kittiwake, Tmux, client_env


def test_the_terminal_ui_drives_a_session(kittiwake: Kittiwake, tmp_path):
    (kittiwake.project / "notes.txt").write_text("kittiwake notes line\n")
    events = EventLog(kittiwake.url, "/global/event")
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", kittiwake.url], client_env(tmp_path))
    try:
        ui.wait_for(lambda s: "Ask anything" in s and "Mock One" in s, 30, "the home screen")

        def ask(text: str) -> None:
            ui.type(text)
            ui.wait_for(lambda s: text in s, 10, "the typed prompt")
            ui.keys("Enter")

        # A brand-new session's first answer streams into view (60 s of it: shown within
        # 20 s, it was not shown whole at the step's end), then Esc Esc aborts it.
        ask("answer slow please")
        ui.wait_for(lambda s: "and slowly" in s, 20, "the first answer streaming")
        ui.keys("Escape")  # the UI asks for a second press; two at once read as one key
        ui.wait_for(lambda s: "again to interrupt" in s, 10, "the first Esc")
        ui.keys("Escape")
        ui.wait_for(lambda s: "interrupted" in s, 20, "the abort")

        ask("say hello")
        ui.wait_for(lambda s: "Hello from the mock." in s, 20, "the streamed answer")

        ask("please read notes.txt")
        ui.wait_for(lambda s: "Read notes.txt" in s and "Tool done." in s, 20, "a read")

        ask("please run echo permitted")
        ui.wait_for(lambda s: "Permission required" in s, 20, "the permission prompt")
        ui.keys("Enter")  # Allow once
        screen = ui.wait_for(lambda s: s.count("Tool done.") == 2, 20, "the tool's answer")
        assert "$ echo permitted" in screen
        assert ui.alive()
    finally:
        ui.close()
        events.close()
    assert not events.invalid, events.invalid[:3]
    kinds = {p["type"] for p in events.payloads()}
    assert {"permission.asked", "permission.replied", "session.status"} <= kinds
    replies = [p for p in events.payloads() if p["type"] == "permission.replied"]
    assert [r["properties"]["reply"] for r in replies] == ["once"]
