"""OpenCode's terminal UI under tmux against ``kittiwake serve``: ``/undo`` restores a file the
write tool changed and hides the prompt; ``/redo`` writes the change back. Every V1 event
on ``/global/event`` is valid."""

from __future__ import annotations

import time
from pathlib import Path

from .conftest import EventLog
from .harness import OPENCODE, Kittiwake, Tmux, client_env


def _until(path: Path, text: str | None, ui: Tmux, timeout: float = 20.0) -> None:
    """Wait until *path* holds *text* (None: does not exist); raise with the screen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = path.read_text() if path.exists() else None
        if now == text:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never held {text!r}: {now!r}\n{ui.screen()}")


def test_undo_and_redo_in_the_terminal_ui(kittiwake: Kittiwake, tmp_path):
    target = kittiwake.project / "undo.txt"
    target.write_text("before the agent\n")
    events = EventLog(kittiwake.url, "/global/event")
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", kittiwake.url], client_env(tmp_path))
    try:
        ui.wait_for(lambda s: "Ask anything" in s and "Mock One" in s, 30, "the home screen")

        def command(text: str, shown: str | None = None) -> None:
            """Type *text* and press Enter once the screen shows *shown* (the slash
            command's entry in the completion list) or, without it, the text."""
            ui.type(text)
            ui.wait_for(lambda s: (shown or text) in s, 10, f"the typed {text}")
            ui.keys("Enter")

        command("please write undo.txt")
        ui.wait_for(lambda s: "Tool done." in s, 20, "the write's answer")
        _until(target, "written by the mock\n", ui)

        command("/undo", "/undo         Undo")
        _until(target, "before the agent\n", ui)
        ui.wait_for(lambda s: "Tool done." not in s, 10, "the reverted answer hidden")

        ui.keys("C-u")  # the UI puts the reverted prompt back into the input
        command("/redo", "/redo         Redo")
        _until(target, "written by the mock\n", ui)
        ui.wait_for(lambda s: "Tool done." in s, 10, "the answer shown again")
        assert ui.alive()
    finally:
        ui.close()
        events.close()
    assert not events.invalid, events.invalid[:3]
    updates = [p for p in events.payloads() if p["type"] == "session.updated"]
    assert any("revert" in p["properties"]["info"] for p in updates)
    assert "revert" not in updates[-1]["properties"]["info"]
