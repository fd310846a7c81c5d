import pytest

from runtime.agents import (
    BUILD,
    BUILTIN_AGENTS,
    PLAN,
    AgentInfo,
    evaluate,
    load_agents,
    load_commands,
    parse_front_matter,
    resolve_agent,
)
from runtime.tools import load_skills

REVIEWER = """---
description: Reviews code   # shown in pickers
mode: subagent
model: anthropic/claude-sonnet-4
steps: 12
tools:
  write: false
  "mcp_*": false
permission:
  edit: deny
  bash:
    "*": ask
    "git diff*": allow
---
You review diffs.

Be brief.
"""


def _write_agent(tmp_path, name, text):
    folder = tmp_path / ".kittiwake" / "agent"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(text)


def test_builtin_agents():
    assert set(BUILTIN_AGENTS) == {"build", "plan", "general", "explore"}
    assert evaluate(BUILD.permission, set(), "edit", ["a.py"]) == "allow"
    assert evaluate(PLAN.permission, set(), "edit", ["a.py"]) == "deny"
    assert evaluate(PLAN.permission, set(), "bash", ["ls"]) == "deny"
    assert evaluate(PLAN.permission, set(), "read", ["a.py"]) == "allow"


def test_default_agent_is_build_and_unknown_denies_everything():
    assert resolve_agent(BUILTIN_AGENTS, None) is BUILD
    ghost = resolve_agent(BUILTIN_AGENTS, "ghost")
    assert ghost.name == "ghost"
    assert evaluate(ghost.permission, set(), "read", ["a.py"]) == "deny"
    only = {"solo": AgentInfo(name="solo", mode="primary")}
    assert resolve_agent(only, None).name == "solo"


def test_custom_agent_file(tmp_path):
    _write_agent(tmp_path, "reviewer", REVIEWER)
    load = load_agents(str(tmp_path))
    assert load.diagnostics == []
    agent = load.agents["reviewer"]
    assert agent.mode == "subagent" and agent.model == "anthropic/claude-sonnet-4"
    assert agent.steps == 12 and agent.description == "Reviews code"
    assert agent.prompt == "You review diffs.\n\nBe brief."
    assert not agent.tool_enabled("write") and not agent.tool_enabled("mcp_fetch")
    assert agent.tool_enabled("read")
    assert evaluate(agent.permission, set(), "edit", ["a.py"]) == "deny"
    assert evaluate(agent.permission, set(), "bash", ["git diff HEAD"]) == "allow"
    assert evaluate(agent.permission, set(), "bash", ["make"]) == "ask"
    assert evaluate(agent.permission, set(), "read", ["a.py"]) == "allow"


def test_config_layers_and_broken_files(tmp_path):
    _write_agent(tmp_path, "broken", "---\nmode: primary\n")
    _write_agent(tmp_path, "steps", "---\nsteps: many\n---\n")
    load = load_agents(
        str(tmp_path),
        config_permission={"edit": "allow", "bash": "ask"},
        config_agents={"build": {"model": "openai/gpt-5", "tools": {"shell": False}}},
    )
    assert sorted(load.agents) == ["build", "explore", "general", "plan"]
    assert len(load.diagnostics) == 2
    assert any("not closed" in d for d in load.diagnostics)
    build, plan = load.agents["build"], load.agents["plan"]
    assert build.model == "openai/gpt-5" and not build.tool_enabled("shell")
    assert evaluate(build.permission, set(), "bash", ["ls"]) == "ask"
    assert evaluate(plan.permission, set(), "edit", ["a.py"]) == "deny"


def test_front_matter_reader():
    meta, body = parse_front_matter("---\na: 1\nb: 2.5\nc: 'x: y'\nd: null\ne: true\n---\nbody")
    assert meta == {"a": 1, "b": 2.5, "c": "x: y", "d": None, "e": True}
    assert body == "body"
    assert parse_front_matter("no fence") == ({}, "no fence")
    assert parse_front_matter("---\n---\nonly a body") == ({}, "only a body")
    lists, _ = parse_front_matter("---\nitems:\n  - a\n  - b: 1\ninline: [x, y]\n---\n")
    assert lists == {"items": ["a", {"b": 1}], "inline": ["x", "y"]}
    folded, _ = parse_front_matter(
        "---\nd: >\n  one\n  two\n\n  three\nl: |-\n  kept\n  lines\n---\n"
    )
    assert folded == {"d": "one two\nthree\n", "l": "kept\nlines"}
    # as OpenCode: a plain value with a colon, invalid YAML, is read as the whole text
    colon, _ = parse_front_matter("---\ndescription: Use when: tests fail\nmode: primary\n---\n")
    assert colon == {"description": "Use when: tests fail", "mode": "primary"}
    with pytest.raises(ValueError, match="not a mapping"):
        parse_front_matter("---\n- a\n- b\n---\n")
    with pytest.raises(ValueError, match="Front matter"):
        parse_front_matter("---\na: [unclosed\n---\n")
    with pytest.raises(ValueError, match="not closed"):
        parse_front_matter("---\na: 1\n")


# Shaped as the SKILL.md files other agents ship: lists, a folded description, nested keys.
_SKILL = """---
name: pdf-tools
description: >
  Extract text and tables from PDF files,
  fill forms and merge documents.
license: Apache-2.0
allowed-tools:
  - Read
  - Bash(pdftotext:*)
metadata:
  version: "1.2"
  tags: [pdf, documents]
---
# PDF tools

Run `pdftotext -layout` first.
"""


def test_skill_command_and_agent_files_with_lists_and_block_scalars(tmp_path):
    skill = tmp_path / ".claude" / "skills" / "pdf-tools"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(_SKILL)
    load = load_skills(str(tmp_path), {})
    assert load.diagnostics == []
    found = load.skills["pdf-tools"]
    assert (
        found.description
        == "Extract text and tables from PDF files, fill forms and merge documents."
    )
    assert found.content == "# PDF tools\n\nRun `pdftotext -layout` first."

    commands = tmp_path / ".kittiwake" / "command"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text(
        "---\ndescription: |\n  Review the diff\n  line by line\nagent: plan\n"
        "aliases: [rv, check]\n---\nReview $ARGUMENTS\n"
    )
    loaded = load_commands(str(tmp_path), None, max_bytes=10_000)
    assert loaded.diagnostics == []
    review = loaded.commands["review"]
    assert review.description == "Review the diff\nline by line\n" and review.agent == "plan"

    _write_agent(
        tmp_path,
        "folded",
        "---\ndescription: >-\n  Reads code\n  and reports\nmode: subagent\n---\nBe brief.\n",
    )
    agents = load_agents(str(tmp_path))
    assert agents.diagnostics == []
    assert agents.agents["folded"].description == "Reads code and reports"
