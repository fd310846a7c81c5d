"""OpenCode's terminal UI shows a Location's MCP servers (under tmux, against
``kittiwake serve``): the footer's count, the ``/mcps`` dialog with each server's state
(and its switch, which connects and disconnects the server), and ``/status`` with the
error of one that failed."""

from __future__ import annotations

import httpx

from tests.mcp_client.conftest import local

from .harness import OPENCODE, Kittiwake, Provider, Tmux, client_env


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
