"""Setting one key of a JSONC configuration file in place (``runtime.config._edit``)."""

from __future__ import annotations

import os
import stat

import pytest

from runtime.config import ConfigError, parse_jsonc, set_jsonc_value, write_config_value

SERVER = {"type": "remote", "url": "https://example.com/mcp"}


def test_a_new_key_joins_its_object_and_every_comment_stays():
    text = '{\n  // why this model\n  "model": "a/b", // trailing\n}\n'
    out = set_jsonc_value(text, ("mcp", "web"), SERVER)
    assert out == (
        '{\n  // why this model\n  "model": "a/b", // trailing\n'
        '  "mcp": {\n    "web": {\n      "type": "remote",\n'
        '      "url": "https://example.com/mcp"\n    }\n  }\n}\n'
    )


def test_an_existing_member_is_replaced_in_its_own_indentation():
    text = '{\n    "mcp": {\n        "web": {"url": "old"}, /* was */\n        "b": 1\n    }\n}'
    out = set_jsonc_value(text, ("mcp", "web"), {"url": "new"})
    assert out == (
        '{\n    "mcp": {\n        "web": {\n            "url": "new"\n        }, /* was */\n'
        '        "b": 1\n    }\n}'
    )


@pytest.mark.parametrize(
    "text",
    ["", "{}", '{"mcp": {}}', '{"mcp": 3}', '{"a": [1, {"b": "}"}], "mcp": {"x": {}},}',
     '/* head */ {"mcp": {"old": {"enabled": false}} /* tail */}'],
)  # fmt: skip
def test_whatever_the_layout_the_result_parses_to_the_value(text: str):
    out = set_jsonc_value(text, ("mcp", "web"), SERVER)
    document, _ = parse_jsonc(out, source="out")
    assert document["mcp"]["web"] == SERVER
    before, _ = parse_jsonc(text, source="in")
    for key, value in (before or {}).items():
        if key != "mcp":
            assert document[key] == value
    if isinstance((before or {}).get("mcp"), dict):
        for key, value in before["mcp"].items():
            assert document["mcp"].get(key, value) == value or key == "web"


def test_write_config_value_keeps_the_mode_and_refuses_a_bad_result(tmp_path):
    path = tmp_path / "kittiwake.jsonc"
    path.write_text('{\n  // note\n  "model": "a/b"\n}\n')
    os.chmod(path, 0o640)
    write_config_value(str(path), ("mcp", "web"), SERVER)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "// note" in path.read_text()
    before = path.read_text()
    with pytest.raises(ConfigError):
        write_config_value(str(path), ("mcp", "web"), {"type": "remote", "timeout": "soon"})
    assert path.read_text() == before
    fresh = tmp_path / "sub" / "kittiwake.json"
    write_config_value(str(fresh), ("mcp", "web"), SERVER)
    assert parse_jsonc(fresh.read_text(), source="f")[0] == {"mcp": {"web": SERVER}}
