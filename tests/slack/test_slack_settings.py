"""``kittiwake slack``'s settings: tokens from ``kittiwake.json`` (``{env:...}`` values) or the
environment, the access lists, and a command that says which token is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gateway.slack import SettingsError, settings_from
from runtime.config import load_config


def test_tokens_and_lists_come_from_the_configuration_with_env_values(tmp_path) -> None:
    (tmp_path / "kittiwake.json").write_text(json.dumps({"slack": {
        "botToken": "{env:MY_BOT}", "appToken": "xapp-file", "apiUrl": "http://127.0.0.1:9/api",
        "allowedUsers": ["U1"], "allowedChannels": ["C1"], "updateInterval": 0.5,
    }}))  # fmt: skip
    env = {"MY_BOT": "xoxb-env", "SLACK_APP_TOKEN": "xapp-env", "HOME": str(tmp_path)}
    config = load_config(str(tmp_path), env).config
    settings = settings_from(config.slack, env, str(tmp_path))
    assert (settings.bot_token, settings.app_token) == ("xoxb-env", "xapp-file")
    assert settings.api_url == "http://127.0.0.1:9/api/" and settings.update_interval == 0.5
    assert settings.directory == str(tmp_path)
    assert settings.admits("T1", "C1", "U1")
    assert not settings.admits("T1", "C1", "U2") and not settings.admits("T1", "C2", "U1")


def test_without_configuration_the_environment_gives_the_tokens(tmp_path) -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    settings = settings_from(None, env, str(tmp_path))
    assert settings.api_url == "https://slack.com/api/" and settings.admits("T", "C", "U")
    with pytest.raises(SettingsError, match="SLACK_APP_TOKEN"):
        settings_from(None, {"SLACK_BOT_TOKEN": "xoxb-1"}, str(tmp_path))


def test_the_command_without_a_token_exits_2_naming_it(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env |= {"HOME": str(tmp_path), "KITTIWAKE_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "slack"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no Slack bot token: set SLACK_BOT_TOKEN or slack.botToken" in done.stderr
