"""``kittiwake mcp add|list|auth|logout|debug`` in real subprocesses, signing in to the
protected server of ``oauth_server.py`` through a browser that ``$BROWSER`` names."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

from runtime.config import parse_jsonc
from tests.gateway.test_cli_run import Cli
from tests.mcp_client.conftest import SERVER, free_port, oauth_servers

PROJECT_CONFIG = """{
  // the team's model, chosen after a long argument
  "model": "local/m", /* keep */
}
"""

FOLLOWER = """#!{python}
# A browser: fetches the URL it is given, following redirects (to the sign-in callback).
import sys

import httpx

answer = httpx.get(sys.argv[1], follow_redirects=True, timeout=30)
sys.exit(0 if answer.status_code == 200 else 1)
"""


async def test_add_writes_the_configuration_keeping_its_comments(tmp_path: Path):
    cli = Cli(tmp_path, None)
    cli.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    path = cli.project / "kittiwake.jsonc"
    path.write_text(PROJECT_CONFIG)
    remote = await cli(
        "mcp", "add", "web", "--url", "http://127.0.0.1:9/mcp", "--header", "X-Key=v=1"
    )
    local = await cli(
        "mcp", "add", "files", "--env", "ROOT=.", "--", sys.executable, str(SERVER), "stdio"
    )
    glob = await cli("mcp", "add", "everywhere", "--url", "https://example.com/mcp", "--global")
    refused = [
        await cli("mcp", "add", "--url", "http://x/mcp"),
        await cli("mcp", "add", "x"),
        await cli("mcp", "add", "x", "--url", "ftp://x"),
        await cli("mcp", "add", "x", "--url", "http://x/mcp", "--env", "A=1"),
        await cli("mcp", "add", "x", "--header", "A=1", "--", "cmd"),
        await cli("mcp", "add", "x", "--header", "novalue", "--url", "http://x/mcp"),
    ]
    listed = await cli("mcp", "list")
    for done in (remote, local, glob, listed):
        assert done.returncode == 0, done.stderr.decode()
    assert remote.stdout.decode() == f'MCP server "web" added to {path} (project)\n'
    text = path.read_text()
    assert "// the team's model, chosen after a long argument" in text and "/* keep */" in text
    document, _ = parse_jsonc(text, source=str(path))
    assert document["model"] == "local/m"
    assert document["mcp"] == {
        "web": {"type": "remote", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "v=1"}},
        "files": {
            "type": "local", "command": [sys.executable, str(SERVER), "stdio"],
            "environment": {"ROOT": "."},
        },
    }  # fmt: skip
    global_file = tmp_path / "xdg" / "kittiwake" / "kittiwake.json"
    assert json.loads(global_file.read_text())["mcp"]["everywhere"]["type"] == "remote"
    for bad in refused:
        assert bad.returncode == 2, bad.stderr.decode()
        assert bad.stderr.decode().startswith("kittiwake: ")
    assert "x" not in parse_jsonc(path.read_text(), source="")[0]["mcp"]
    out = listed.stdout.decode()
    assert f"✓ files  connected\n    {sys.executable} {SERVER} stdio\n" in out
    assert "✗ web  failed: cannot reach http://127.0.0.1:9/mcp" in out
    assert out.endswith("3 server(s)\n")


async def test_auth_debug_list_and_logout(tmp_path: Path):
    cli = Cli(tmp_path, None)
    browser = tmp_path / "browser"
    browser.write_text(FOLLOWER.replace("{python}", sys.executable))
    browser.chmod(0o755)
    cli.env["BROWSER"] = str(browser)
    port = free_port()
    async with oauth_servers() as (issuer, url):
        entry = {"type": "remote", "url": url, "oauth": {"callbackPort": port}}
        (cli.project / "kittiwake.json").write_text(json.dumps({"mcp": {"web": entry}}))
        before = await cli("mcp", "debug", "web")
        signed = await cli("mcp", "auth")
        stored = cli.data / "mcp-auth.json"
        mode = stat.S_IMODE(stored.stat().st_mode)
        token = json.loads(stored.read_text())["web"]["tokens"]["accessToken"]
        listed_auth = await cli("mcp", "auth", "list")
        after = await cli("mcp", "debug", "web")
        listed = await cli("mcp", "list")
        logout = await cli("mcp", "logout", "web")
        again = await cli("mcp", "logout", "web")
        missing = await cli("mcp", "debug", "nope")
    for done in (before, signed, listed_auth, after, listed, logout):
        assert done.returncode == 0, done.stderr.decode()
    lines = before.stdout.decode().splitlines()
    assert "auth status: not authenticated" in lines
    assert "initialize: HTTP 401 Unauthorized" in lines
    assert any(
        line.startswith("WWW-Authenticate: Bearer") and "resource_metadata=" in line
        for line in lines
    )
    assert f"authorization server: {issuer}/" in lines
    assert f"registration: {issuer}/register" in lines
    assert f"resource: {url}" in lines
    out = signed.stdout.decode()
    assert out.startswith(f"Authorize in your browser:\n  {issuer}/authorize?")
    assert out.splitlines()[-1] == f"Signed in to web (tokens in {cli.data / 'mcp-auth.json'})"
    assert mode == 0o600
    assert listed_auth.stdout.decode().startswith(f"✓ web  authenticated\n    {url}\n")
    debug = after.stdout.decode()
    assert "initialize: HTTP 200 OK" in debug and "auth status: authenticated" in debug
    assert f"access token: {token[:4]}***{token[-4:]}" in debug and token not in debug
    assert f"✓ web  connected (OAuth)\n    {url}\n" in listed.stdout.decode()
    assert logout.stdout.decode() == "Removed OAuth credentials for web\n"
    assert "web" not in json.loads(stored.read_text())
    assert (
        again.returncode == 1
        and again.stderr.decode() == "kittiwake: No credentials found for: web\n"
    )
    assert missing.returncode == 1 and "MCP server not found: nope" in missing.stderr.decode()
