"""The server specs a Location makes of its ``mcp`` configuration."""

from __future__ import annotations

import msgspec

from runtime.config import Config
from runtime.mcp import DEFAULT_CALL_TIMEOUT, server_specs
from tests.mcp_client.test_config import OPENCODE_FILE, parse_file


def test_specs_of_local_remote_and_legacy_entries():
    config = msgspec.convert(parse_file(OPENCODE_FILE).data, Config)
    specs = server_specs(config, "/proj")
    files, github, plain, old = (specs[n] for n in ("files", "github", "plain", "old"))
    assert (files.type, files.command, files.cwd) == (
        "local",
        ["npx", "-y", "srv"],
        "/proj/tools/srv",
    )
    assert files.environment == {"TOKEN": "s3"} and files.timeout == 1.5 and files.enabled
    assert github.type == "remote" and github.headers == {"Authorization": "Bearer g7"}
    assert github.oauth and github.oauth_options == {
        "clientId": "abc", "scope": "repo", "callbackPort": 19876,
    }  # fmt: skip
    assert github.timeout == 90.0  # experimental.mcp_timeout, in seconds
    assert not plain.oauth and not plain.enabled
    assert old.type is None and not old.enabled and old.error is None
    assert all(s.error is None for s in specs.values())


def test_defaults_and_entries_that_cannot_be_used():
    data = {
        "mcp": {
            "here": {"type": "local", "command": ["srv"]},
            "nocommand": {"type": "local"},
            "nourl": {"type": "remote"},
            "ftp": {"type": "remote", "url": "ftp://x"},
            "typeless": {"enabled": True},
        }
    }
    specs = server_specs(msgspec.convert(data, Config), "/proj")
    assert specs["here"].cwd == "/proj" and specs["here"].timeout == DEFAULT_CALL_TIMEOUT == 60
    assert specs["nocommand"].error == "mcp.nocommand: a local server needs a command"
    assert specs["nourl"].error == "mcp.nourl: a remote server needs a url"
    assert "must be http:// or https://" in (specs["ftp"].error or "")
    assert specs["typeless"].error == "mcp.typeless: needs a type, local or remote"


def test_exports_are_pinned_and_sorted_and_the_sdk_is_not_imported():
    import subprocess
    import sys

    import runtime.mcp

    public = sorted(n for n in vars(runtime.mcp) if not n.startswith("_") and n != "annotations")
    assert runtime.mcp.__all__ == public
    code = "import sys, gateway._gateway, runtime.mcp; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
