"""OpenCode's ``mcp`` configuration as Kittiwake reads it: the keys, the specs made of
them, ``{env:}`` in headers, the legacy form, ``experimental.mcp_timeout`` and ``tools``."""

from __future__ import annotations

import json

import msgspec

from runtime.agents import load_agents
from runtime.config import Config, parse_document

OPENCODE_FILE = """{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "files": {"type": "local", "command": ["npx", "-y", "srv"], "cwd": "tools/srv",
              "environment": {"TOKEN": "{env:SRV_TOKEN}"}, "timeout": 1500},
    "github": {"type": "remote", "url": "https://api.example/mcp",
               "headers": {"Authorization": "Bearer {env:GH_TOKEN}"},
               "oauth": {"clientId": "abc", "scope": "repo", "callbackPort": 19876}},
    "plain": {"type": "remote", "url": "http://127.0.0.1:9/mcp", "oauth": false,
              "enabled": false},
    "old": {"enabled": false}
  },
  "experimental": {"mcp_timeout": 90000},
  "tools": {"github_*": false}
}"""


def parse_file(text: str):
    return parse_document(
        text, source="/proj/kittiwake.json", env={"SRV_TOKEN": "s3", "GH_TOKEN": "g7"},
        base_dir="/proj", home="/home/u", read_file=lambda path: "",
    )  # fmt: skip


def test_opencodes_mcp_keys_are_read_without_a_diagnostic():
    document = parse_file(OPENCODE_FILE)
    assert document.diagnostics == []
    config = msgspec.convert(document.data, Config)
    assert config.mcp is not None and set(config.mcp) == {"files", "github", "plain", "old"}
    assert config.experimental is not None and config.experimental.mcp_timeout == 90000


def test_a_wrong_mcp_value_is_a_config_error():
    bad = json.dumps({"mcp": {"x": {"type": "local", "command": "srv", "timeout": -1}}})
    try:
        parse_file(bad)
    except Exception as exc:  # noqa: BLE001 - the error's text is what is checked
        assert "mcp" in str(exc)
    else:
        raise AssertionError("a string command was accepted")


def test_top_level_tools_switch_tools_off_for_every_agent_under_their_own(tmp_path):
    agents = load_agents(
        str(tmp_path), config_tools={"github_*": False},
        config_agents={"review": {"tools": {"github_read": True}}},
    ).agents  # fmt: skip
    assert not agents["build"].tool_enabled("github_create_issue")
    assert not agents["plan"].tool_enabled("github_read")
    assert agents["review"].tool_enabled("github_read")
    assert not agents["review"].tool_enabled("github_create_issue")
    assert agents["build"].tool_enabled("read")
