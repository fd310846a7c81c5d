"""A Location's settings from its configuration: agents, models, instructions, errors."""

from __future__ import annotations

import json

from actors import Configuration
from actors.session._config import location_watch
from runtime import Location, ModelRef, open_runtime
from runtime.llm import ScriptedLLM
from runtime.tools import ToolOutputLimits
from tests.execution.conftest import answer, prompt


def write_config(directory, data) -> None:
    (directory / "kittiwake.json").write_text(json.dumps(data))


def test_settings_follow_the_configuration(tmp_path):
    write_config(
        tmp_path,
        {
            "model": "local/big",
            "small_model": "local/small",
            "default_agent": "plan",
            "agent": {"old": {"prompt": "gone", "disable": True}, "new": {"prompt": "hi"}},
            "permission": {"edit": "deny"},
            "tool_output": {"max_lines": 10},
        },
    )
    settings = location_watch(str(tmp_path), Configuration(env={"HOME": str(tmp_path)})).load_now()
    assert settings.model == ModelRef(id="big", provider_id="local")
    assert settings.small_model == ModelRef(id="small", provider_id="local")
    assert settings.agent(None).name == "plan"
    assert "old" not in settings.agents and settings.agents["new"].prompt == "hi"
    edit = [r.action for r in settings.agents["new"].permission if r.permission == "edit"]
    assert edit[-1] == "deny"
    assert settings.error is None and settings.llm is None  # no providers configured
    assert settings.tool_output_limits() == ToolOutputLimits(max_lines=10)


def test_without_configuration_only_agent_files_count(tmp_path):
    write_config(tmp_path, {"default_agent": "plan"})
    (tmp_path / ".kittiwake" / "agent").mkdir(parents=True)
    (tmp_path / ".kittiwake" / "agent" / "mine.md").write_text("---\nmode: primary\n---\nMine.")
    settings = location_watch(str(tmp_path), None).load_now()
    assert settings.agent(None).name == "build"
    assert settings.agents["mine"].prompt == "Mine."


def test_a_broken_file_fails_turns_with_its_position(tmp_path):
    (tmp_path / "kittiwake.json").write_text('{"model": }')
    settings = location_watch(str(tmp_path), Configuration(env={"HOME": str(tmp_path)})).load_now()
    assert settings.error is not None and "kittiwake.json:1:11" in settings.error
    assert settings.llm is not None  # a client whose every turn fails with that message


def test_clients_are_shared_by_equal_provider_configuration():
    made: list[dict] = []

    def llm_for(data):
        made.append(dict(data))
        return ScriptedLLM(lambda request: answer())

    configuration = Configuration(env={}, llm_for=llm_for, max_clients=1)
    one = {"provider": {"a": {}}, "model": "a/x"}
    assert configuration.client_for({"model": "a/x"}) is None  # nothing to route
    first = configuration.client_for(one)
    assert configuration.client_for({**one, "model": "a/y"}) is first
    configuration.client_for({"provider": {"b": {}}})
    assert configuration.client_for(one) is not first  # evicted beyond max_clients
    assert len(made) == 3


async def test_configured_instructions_and_model_reach_the_request(tmp_path):
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "style.md").write_text("Always write TESTS first.")
    write_config(work, {"model": "scripted/m1", "instructions": ["docs/*.md", "missing.md"]})
    llm = ScriptedLLM(lambda request: answer("ok"))
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with open_runtime(data_dir=tmp_path / "data", llm=llm, configuration=configuration) as rt:
        info = await rt.sessions.create(location=Location(directory=str(work)))
        await rt.sessions.prompt(info.id, prompt=prompt("one"))
        await rt.sessions.wait_idle(info.id)
        write_config(work, {"model": "scripted/m2"})  # instructions removed, model changed
        await rt.sessions.prompt(info.id, prompt=prompt("two"))
        await rt.sessions.wait_idle(info.id)
        assert (await rt.execution.location(str(work))).registry.env.limits == ToolOutputLimits()
    first, second = llm.requests
    assert first.model.model_id == "m1" and second.model.model_id == "m2"
    assert "Always write TESTS first." in "\n".join(first.system)
    assert "no longer apply" in json.dumps([str(m) for m in second.messages])
