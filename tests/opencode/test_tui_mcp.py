"""OpenCode's terminal UI shows a Location's MCP servers (under tmux, against
``kittiwake serve``): the footer's count, the ``/mcps`` dialog with each server's state
(and its switch, which connects and disconnects the server), and ``/status`` with the
error of one that failed; and a server's elicitation as its question dialog, whose
answers go back to the server."""

from __future__ import annotations

import httpx

from tests.llm.conftest import Recorded, Reply
from tests.mcp_client.conftest import local

from .harness import (
    OPENCODE,
    Kittiwake,
    Provider,
    Tmux,
    calls,
    client_env,
    last_user_text,
    respond,
    said,
)


def ordering(request: Recorded) -> Reply:
    """``order`` calls the test server's ``order`` tool; a tool result is quoted back."""
    body = request.json()
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return said("Got: ", str(last.get("content")))
    if "order" in last_user_text(body).split():
        return calls("test_order", {})
    return respond(request)


def test_the_terminal_ui_shows_and_switches_the_mcp_servers(provider: Provider, tmp_path):
    servers = {
        "notes": local(),
        "off": {"type": "local", "command": ["true"], "enabled": False},
        "broken": {"type": "local", "command": ["no-such-mcp-command"]},
    }
    kittiwake = Kittiwake(tmp_path / "served", provider, mcp=servers).start()
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", kittiwake.url], client_env(tmp_path))
    try:
        ui.wait_for(lambda s: "Ask anything" in s and "1 MCP" in s, 30, "the footer's MCP")

        def command(name: str, offered: str) -> None:
            ui.type(name)
            ui.wait_for(lambda s: offered in s, 10, f"{name} offered")
            ui.keys("Enter")

        command("/status", "View status")
        screen = ui.wait_for(lambda s: "3 MCP Servers" in s, 10, "the status dialog")
        assert "notes Connected" in screen and "off Disabled in configuration" in screen
        assert "broken command not found: no-such-mcp-command" in screen
        ui.keys("Escape")
        ui.wait_for(lambda s: "3 MCP Servers" not in s, 10, "the status dialog closed")

        command("/mcps", "Toggle MCPs")
        screen = ui.wait_for(lambda s: "notes connected" in s, 10, "the MCP dialog")
        assert "broken failed" in screen and "off disabled" in screen
        ui.type("notes")
        ui.wait_for(lambda s: "broken failed" not in s, 10, "the dialog filtered")
        ui.keys("Space")
        ui.wait_for(lambda s: "notes disabled" in s and "0 MCP" in s, 20, "notes switched off")
        switched_off = httpx.get(f"{kittiwake.url}/mcp", timeout=10).json()["notes"]
        ui.keys("Space")
        ui.wait_for(lambda s: "notes connected" in s and "1 MCP" in s, 30, "notes back on")
        assert ui.alive()
    finally:
        ui.close()
        kittiwake.stop()
    assert switched_off == {"status": "disabled"}


def _typed(line: str, text: str) -> bool:
    """Whether *line* is the question dialog's line holding the typed answer *text*."""
    return line.startswith("  ┃") and line[3:].strip() == text


def test_an_elicitation_is_answered_in_the_terminal_uis_question_dialog(tmp_path):
    provider = Provider(ordering).start()
    kittiwake = Kittiwake(tmp_path / "served", provider, mcp={"test": local()}).start()
    ui = Tmux(tmp_path, [str(OPENCODE), "attach", kittiwake.url], client_env(tmp_path))
    try:
        ui.wait_for(lambda s: "Ask anything" in s and "1 MCP" in s, 30, "the home screen")
        ui.type("please order")
        ui.wait_for(lambda s: "please order" in s, 10, "the typed prompt")
        ui.keys("Enter")
        screen = ui.wait_for(lambda s: "What would you like?" in s, 30, "the question")
        assert "1. Accept" in screen and "2. Decline" in screen
        assert "test asks   Flavour   Scoops   Cone   Note" in screen
        ui.keys("Enter")  # Accept
        ui.wait_for(lambda s: "Flavour (required)" in s and "2. lemon" in s, 10, "Flavour")
        ui.keys("Down")
        ui.keys("Enter")
        ui.wait_for(lambda s: "How many scoops? (required)" in s, 10, "Scoops")
        ui.keys("Enter")  # opens the typed answer; what is typed before it opens is lost
        for _ in range(5):
            ui.type("3")
            try:
                ui.wait_for(lambda s: any(_typed(line, "3") for line in s.splitlines()), 2)
                break
            except AssertionError:
                continue
        ui.keys("Enter")
        ui.wait_for(lambda s: "1. Yes" in s and "2. No" in s, 10, "Cone")
        ui.keys("Enter")
        ui.wait_for(lambda s: "1. Yes" not in s and "Type your own answer" in s, 10, "Note")
        ui.keys("Tab")
        screen = ui.wait_for(lambda s: "Review" in s, 10, "the review")
        assert "Flavour: lemon" in screen and "Scoops: 3" in screen and "Cone: Yes" in screen
        ui.keys("Enter")
        answered = '{"action":"accept","content":{"flavour":"lemon","scoops":3,"cone":true}}'
        ui.wait_for(lambda s: answered in s, 30, "the server's answer")
    finally:
        ui.close()
        kittiwake.stop()
        provider.stop()
