"""The coding-agent system prompt: which text an agent sends for which model."""

from __future__ import annotations

import re

import pytest

from runtime.agents import BUILD, CODING_PROMPT, PLAN, AgentInfo, model_family, system_prompt
from runtime.tools import builtin_tools


def test_the_prompt_names_the_tools_that_exist():
    named = set(re.findall(r"`([a-z_]+)`", CODING_PROMPT))
    tools = {tool.name for tool in builtin_tools()}
    assert tools <= named  # every built-in tool is explained
    assert "bash" not in named and "list" not in named  # no tool that does not exist


@pytest.mark.parametrize(
    ("provider", "model", "family"),
    [
        ("anthropic", "claude-sonnet-5", "anthropic"),
        ("openai", "gpt-5.5", "openai"),
        ("openai", "o3", "openai"),
        ("openrouter", "openai/o4-mini", "openai"),
        ("openrouter", "anthropic/claude-opus-4.8", "anthropic"),
        ("github-copilot", "gpt-5.2-codex", "openai"),
        ("amazon-bedrock", "us.anthropic.claude-sonnet-5", "anthropic"),
        ("google", "gemini-2.5-pro", "google"),
        ("local", "qwen3-coder", "other"),
        ("deepseek", "deepseek-chat", "other"),
    ],
)
def test_model_family(provider, model, family):
    assert model_family(provider, model) == family


def test_builtin_agents_send_the_coding_prompt_with_their_familys_editing_advice():
    (claude,) = system_prompt(BUILD, "anthropic", "claude-sonnet-5")
    (gpt,) = system_prompt(BUILD, "openai", "gpt-5.5")
    (local,) = system_prompt(BUILD, "local", "qwen3-coder")
    assert all(text.startswith(CODING_PROMPT) for text in (claude, gpt, local))
    assert "Prefer `edit`" in claude and "Prefer `apply_patch`" in gpt
    assert local == CODING_PROMPT
    assert "Plan mode" not in claude


def test_the_plan_agent_is_told_it_is_read_only():
    (text,) = system_prompt(PLAN, "openai", "gpt-5.5")
    assert text.startswith(CODING_PROMPT) and "# Plan mode" in text
    assert "editing files and running shell commands are denied" in text


def test_an_agents_own_prompt_replaces_the_coding_prompt():
    reviewer = AgentInfo(name="reviewer", prompt="You review diffs.")
    assert system_prompt(reviewer, "openai", "gpt-5.5") == ["You review diffs."]
    bare = AgentInfo(name="helper")
    assert system_prompt(bare, "anthropic", "claude-haiku-4-5")[0].startswith(CODING_PROMPT)
