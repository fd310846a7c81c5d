"""Configuration sources: JSONC, substitution, validation, precedence and deep merge."""

from __future__ import annotations

import json
import os

import pytest
import trio

import runtime.config as config
from runtime.config import (
    ConfigError,
    ConfigWatch,
    Document,
    load_config,
    merge_documents,
    parse_document,
    parse_jsonc,
    write_config_patch,
)
from runtime.context import RACY_NS


def parse(text: str, *, env=None, files=None, source="kittiwake.jsonc") -> Document:
    files = files or {}

    def read_file(path: str) -> str:
        if path not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return files[path]

    return parse_document(
        text, source=source, env=env or {}, base_dir="/proj", home="/home/u", read_file=read_file
    )


def test_exports_are_sorted():
    assert config.__all__ == sorted(config.__all__)


def test_jsonc_comments_and_trailing_commas():
    text = """{
      // a line comment with "quotes" and a {brace}
      "model": "local/m", /* a block
      comment */ "small_model": "local/s",
      "instructions": ["a.md", "b.md",],
      "url": "http://x//not-a-comment/*nor this*/",
    }"""
    data, offsets = parse_jsonc(text, source="f")
    assert data == {
        "model": "local/m",
        "small_model": "local/s",
        "instructions": ["a.md", "b.md"],
        "url": "http://x//not-a-comment/*nor this*/",
    }
    line, column = 3, 16
    assert text.encode()[offsets[("model",)] :].startswith(b'"local/m"')
    assert text.splitlines()[line - 1][column - 1 :].startswith('"local/m"')


def test_syntax_error_names_file_line_and_column():
    with pytest.raises(ConfigError) as caught:
        parse('{\n  "model": "a"\n  "small_model": "b"\n}', source="/p/kittiwake.json")
    err = caught.value
    assert (err.source, err.line, err.column) == ("/p/kittiwake.json", 3, 3)
    assert str(err).startswith("/p/kittiwake.json:3:3: ")
    with pytest.raises(ConfigError, match="unterminated comment") as caught:
        parse('{"model": "a"} /* open')
    assert caught.value.line == 1


def test_wrong_type_names_the_key_path_line_and_column():
    text = """{
  "provider": {
    "ok": {"models": {"m": {"limit": {"context": 1, "output": 1}}}},
    "my-local": {"models": {"big": {"limit": {"context": "lots", "output": 1}}}}
  }
}"""
    with pytest.raises(ConfigError) as caught:
        parse(text, source="p.json")
    err = caught.value
    assert err.path == ("provider", "my-local", "models", "big", "limit", "context")
    assert 'provider["my-local"].models.big.limit.context' in str(err)
    assert (err.line, err.column) == (4, 58)
    assert "Expected `int`, got `str`" in str(err)
    with pytest.raises(ConfigError, match=r"permission.bash: Invalid enum value 'never'"):
        parse('{"permission": {"bash": "never"}}')
    with pytest.raises(ConfigError, match=r"server.port: Expected `int` <= 65535"):
        parse('{"server": {"port": 99999}}')


def test_unknown_keys_are_diagnostics_and_dropped():
    doc = parse('{\n "theme": "dark",\n "model": "a/b",\n "agent": {"x": {"color": "red"}}}')
    assert doc.data == {"model": "a/b", "agent": {"x": {"color": "red"}}}
    assert [(d.path, d.line) for d in doc.diagnostics] == [("theme", 2)]
    doc = parse('{"agent": {"x": {"colour": "red"}}, "provider": {"p": {"options": {"x": 1}}}}')
    assert doc.data["agent"]["x"] == {"colour": "red"}  # an agent's other keys are kept
    assert doc.data["provider"]["p"]["options"] == {"x": 1}  # provider options pass through
    assert [d.path for d in doc.diagnostics] == ["agent.x.colour"]


def test_env_and_file_substitution():
    files = {
        "/proj/prompts/review.md": '  Review "carefully".\nThen stop.\n  ',
        "/home/u/k": "sk-1",
    }
    doc = parse(
        """{
        // "{file:missing.md}" on a commented line is left alone
        "model": "{env:PROVIDER}/m",
        "provider": {"p": {"options": {"apiKey": "{file:~/k}", "baseURL": "{env:UNSET}"}}},
        "agent": {"review": {"prompt": "{file:prompts/review.md}"}}
        }""",
        env={"PROVIDER": "local"},
        files=files,
    )
    assert doc.data["model"] == "local/m"
    assert doc.data["provider"]["p"]["options"] == {"apiKey": "sk-1", "baseURL": ""}
    assert doc.data["agent"]["review"]["prompt"] == 'Review "carefully".\nThen stop.'
    assert doc.references == ["/home/u/k", "/proj/prompts/review.md"]
    with pytest.raises(ConfigError, match=r"bad file reference \{file:gone.md\}: /proj/gone.md"):
        parse('{"model": "{file:gone.md}"}')


def test_error_position_after_a_substitution_is_in_the_original_text():
    with pytest.raises(ConfigError) as caught:
        parse('{"model": "{env:LONG}" "x"}', env={"LONG": "a-much-longer-value"})
    assert (caught.value.line, caught.value.column) == (1, 24)


def test_precedence_and_deep_merge_across_three_sources():
    low = Document(
        source="global",
        data={
            "model": "a/1",
            "provider": {
                "p": {"options": {"baseURL": "http://g", "timeout": 5}, "models": {"x": {}}}
            },
            "permission": {"bash": "ask", "edit": "allow"},
            "instructions": ["g.md"],
        },
    )
    middle = Document(
        source="project",
        data={
            "provider": {"p": {"options": {"baseURL": "http://p"}}},
            "permission": {"bash": "deny"},
            "instructions": ["p.md", "g.md"],
        },
    )
    top = Document(source="inline", data={"model": "b/2", "permission": "allow"})
    merged, origins = merge_documents([low, middle, top])
    assert merged == {
        "model": "b/2",
        "provider": {"p": {"options": {"baseURL": "http://p", "timeout": 5}, "models": {"x": {}}}},
        "permission": "allow",
        "instructions": ["g.md", "p.md"],
    }
    assert origins == {
        "model": "inline",
        "provider.p.options.baseURL": "project",
        "provider.p.options.timeout": "global",
        "provider.p.models.x": "global",
        "permission": "inline",
        "instructions": "project",
    }
    merged, _ = merge_documents([top, middle])  # an object replaces a string
    assert merged["permission"] == {"bash": "deny"}


def write(path, content) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_load_config_reads_every_source_in_order(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "pkg" / "sub"
    sub.mkdir(parents=True)
    home = tmp_path / "home"
    glob = write(
        home / ".config/kittiwake/kittiwake.jsonc", '{"model": "g/1", "username": "g", // c\n}'
    )
    explicit = write(tmp_path / "explicit.json", {"username": "e", "small_model": "e/s"})
    root_file = write(repo / "kittiwake.json", {"small_model": "r/s", "default_agent": "plan"})
    leaf_file = write(
        sub / ".kittiwake/kittiwake.json", {"default_agent": "build", "share": "manual"}
    )
    write(tmp_path / "kittiwake.json", {"model": "outside/the-repo"})  # above the worktree root
    env = {
        "HOME": str(home),
        "KITTIWAKE_CONFIG": explicit,
        "KITTIWAKE_CONFIG_CONTENT": '{"share": "disabled"}',
    }
    loaded = load_config(str(sub), env)
    assert loaded.sources == [glob, explicit, root_file, leaf_file, "KITTIWAKE_CONFIG_CONTENT"]
    assert loaded.data == {
        "model": "g/1",
        "username": "e",
        "small_model": "r/s",
        "default_agent": "build",
        "share": "disabled",
    }
    assert loaded.config.default_agent == "build"
    assert (
        loaded.origins["username"] == explicit
        and loaded.origins["share"] == "KITTIWAKE_CONFIG_CONTENT"
    )
    assert str(tmp_path / "kittiwake.json") not in loaded.looked_at
    only_global = config.load_global_config(env)
    assert only_global.sources == [glob] and only_global.data == {"model": "g/1", "username": "g"}
    with pytest.raises(ConfigError, match="KITTIWAKE_CONFIG names a missing file"):
        load_config(str(sub), {**env, "KITTIWAKE_CONFIG": str(tmp_path / "nope.json")})
    disabled = load_config(str(sub), {**env, "KITTIWAKE_DISABLE_PROJECT_CONFIG": "1"})
    assert root_file not in disabled.sources


def test_no_source_at_all_is_an_empty_configuration(tmp_path):
    loaded = load_config(str(tmp_path), {"HOME": str(tmp_path)})
    assert (loaded.data, loaded.origins, loaded.sources) == ({}, {}, [])
    assert merge_documents([Document(source="a", data={})]) == ({}, {})


def test_write_config_patch_merges_and_replaces_atomically(tmp_path):
    path = write(
        tmp_path / "kittiwake.json",
        '{"model": "a/b", // keep the key\n "agent": {"x": {"steps": 2}}}',
    )
    merged = write_config_patch(path, {"agent": {"x": {"prompt": "hi"}}, "small_model": "a/s"})
    assert merged == {
        "model": "a/b",
        "agent": {"x": {"steps": 2, "prompt": "hi"}},
        "small_model": "a/s",
    }
    assert json.loads((tmp_path / "kittiwake.json").read_text()) == merged
    with pytest.raises(ConfigError, match="agent.x.steps"):
        write_config_patch(path, {"agent": {"x": {"steps": "many"}}})
    assert json.loads((tmp_path / "kittiwake.json").read_text()) == merged
    assert sorted(os.listdir(tmp_path)) == ["kittiwake.json"]


async def test_watch_reloads_only_after_a_change(tmp_path):
    path = tmp_path / "kittiwake.json"
    write(path, {"model": "a/1"})
    env = {"HOME": str(tmp_path / "home")}

    def loader():
        loaded = load_config(str(tmp_path), env)
        return loaded, loaded.looked_at

    await trio.sleep(RACY_NS / 1e9 + 0.02)  # stamps of files changed this recently are not trusted
    watch = ConfigWatch(loader)
    assert (await watch.load()).config.model == "a/1"
    assert (await watch.load()).config.model == "a/1"
    assert watch.loads == 1
    write(path, {"model": "a/2"})
    assert (await watch.load()).config.model == "a/2"
    assert watch.loads == 2
    write(path, '{"model": ')
    with pytest.raises(ConfigError):
        await watch.load()
    assert watch.current().config.model == "a/2"
    await trio.lowlevel.checkpoint()
