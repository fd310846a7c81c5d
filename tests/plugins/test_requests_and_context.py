"""Plugins in provider requests (``chat_params``, ``chat_headers``, ``system_transform``,
``tool_definition``), as tools (typed functions), and as Context Sources registered through
the System Context Registry: a change becomes a Mid-Conversation System Message."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import msgspec
import trio

from actors import Configuration, ProviderClients
from runtime import llm
from runtime.context import SystemContext
from runtime.llm import ScriptedLLM
from runtime.plugins import ChatParams, ToolCall, as_tool, hookimpl, plugin_tool
from tests.config.conftest import chat_text, local_provider
from tests.execution.conftest import answer, prompt, tool_calls
from tests.llm.conftest import LocalServer
from tests.plugins.conftest import plugin_runtime, session
from tests.plugins.test_tool_calls import results


class Shaper:
    name = "shaper"

    def __init__(self) -> None:
        self.chats: list[Any] = []

    @hookimpl
    def chat_params(self, chat: Any, params: ChatParams) -> ChatParams:
        self.chats.append(chat)
        return msgspec.structs.replace(params, temperature=0.2, options={"reasoning_effort": "low"})

    @hookimpl
    async def chat_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {**headers, "x-team": "kittiwake"}

    @hookimpl
    def system_transform(self, system: list[str]) -> list[str]:
        return [*system, "Answer in English."]

    @hookimpl
    def tool_definition(self, definition: llm.ToolDefinition) -> llm.ToolDefinition | None:
        if definition.name == "read":
            return msgspec.structs.replace(definition, description="Read a file (audited).")
        return None


class Second:
    name = "second"

    @hookimpl
    def chat_params(self, params: ChatParams) -> ChatParams:
        assert params.temperature == 0.2  # the first plugin's answer, in load order
        return msgspec.structs.replace(params, top_p=0.9)


async def test_request_hooks_shape_each_provider_request(tmp_path: Path) -> None:
    shaper = Shaper()
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[shaper, Second()]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("hi"))
        await rt.sessions.wait_idle(sid)
    [request] = client.requests
    assert (request.generation.temperature, request.generation.top_p) == (0.2, 0.9)
    assert request.options == {"reasoning_effort": "low"}
    assert request.headers == {"x-team": "kittiwake"}
    assert request.system[-1] == "Answer in English." and len(request.system) >= 3
    tools = {t.name: t.description for t in request.tools}
    assert tools["read"] == "Read a file (audited)." and tools["glob"] != "Read a file (audited)."
    [chat] = shaper.chats
    assert (chat.session_id, chat.agent, chat.directory) == (sid, "build", str(work))


async def test_request_headers_reach_the_wire(nursery: trio.Nursery) -> None:
    server = LocalServer()
    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    server.port = listeners[0].socket.getsockname()[1]
    server.queue(chat_text("hi"))
    catalog = llm.Catalog.from_models_dev({}).with_config(
        {"provider": local_provider(server.port, "m")}
    )
    async with llm.provider_http_client() as http:
        client = llm.ProviderClient(catalog, llm.Auth(env={}), http_client=http)
        request = llm.LLMRequest(
            model=llm.ModelRef(provider_id="local", model_id="m"), system=["s"],
            messages=[llm.UserMessage(content=[llm.TextPart(text="hi")])],
            headers={"x-team": "kittiwake"},
        )  # fmt: skip
        events = [e async for e in client.stream(request)]
    assert not [e for e in events if isinstance(e, llm.ProviderError)]
    [recorded] = server.requests
    assert recorded.headers["x-team"] == "kittiwake"


@plugin_tool(permission="count")
async def count_words(
    text: Annotated[str, msgspec.Meta(description="The text to count")],
    call: ToolCall,
    at_least: int = 0,
) -> dict[str, Any]:
    """Count the words of a text."""
    words = len(text.split())
    return {"words": words, "enough": words >= at_least, "session": call.session_id}


def shout(text: str) -> str:
    """Shout a text (a plain function runs in a worker thread)."""
    return text.upper()


class Tools:
    name = "tools"

    @hookimpl
    def tool(self) -> list[Any]:
        return [count_words, shout]


def test_a_typed_function_becomes_a_tool_whose_signature_is_its_schema() -> None:
    tool = as_tool(count_words)
    assert (tool.name, tool.description, tool.permission) == (
        "count_words", "Count the words of a text.", "count",
    )  # fmt: skip
    assert tool.schema == {
        "type": "object", "title": "count_words_input", "additionalProperties": False,
        "properties": {"text": {"type": "string", "description": "The text to count"},
                       "at_least": {"type": "integer", "default": 0}},
        "required": ["text"],
    }  # fmt: skip
    assert as_tool(shout).permission == "shout"


async def test_function_tools_are_offered_and_run(tmp_path: Path) -> None:
    calls = tool_calls(
        ("c1", "count_words", {"text": "one two three", "at_least": 2}),
        ("c2", "shout", {"text": "hey"}), ("c3", "count_words", {"txt": "typo"}),
    )  # fmt: skip
    client = ScriptedLLM([calls, answer()])
    async with plugin_runtime(tmp_path, client, plugins=[Tools()]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("count"))
        await rt.sessions.wait_idle(sid)
    assert {"count_words", "shout"} <= {t.name for t in client.requests[0].tools}
    counted, shouted, typo = results(client.requests[1])
    assert msgspec.json.decode(counted[1]) == {"words": 3, "enough": True, "session": sid}
    assert shouted[1:] == ("HEY", False)
    assert typo[2] and "Invalid tool input for count_words" in typo[1]


class Notes:
    """A Context Source whose value the test changes between turns."""

    name = "notes"

    def __init__(self) -> None:
        self.value = "deploys are frozen"

    @hookimpl
    def context_source(self) -> SystemContext:
        return SystemContext.loaded(
            "notes/status", str, self.value, lambda v: f"Team status: {v}",
            lambda v: f"Team status is now: {v}",
        )  # fmt: skip


def _systems(request: llm.LLMRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, llm.SystemMessage)]


async def test_a_context_source_is_in_the_baseline_and_its_change_arrives_mid_conversation(
    tmp_path: Path,
) -> None:
    notes = Notes()
    client = ScriptedLLM([answer(), answer()])
    async with plugin_runtime(tmp_path, client, plugins=[notes]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        notes.value = "deploys are open"
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        location = await rt.execution.location(str(work))
        keys = location.context.keys
    first, second = client.requests
    assert "Team status: deploys are frozen" in first.system[-1]
    assert second.system == first.system  # the baseline stays: the provider's cache holds
    assert _systems(second) == ["Team status is now: deploys are open"]
    assert "plugin/notes" in keys and "core/builtins" in keys


class Stray:
    name = "stray"

    @hookimpl
    def context_source(self) -> SystemContext:
        return SystemContext.loaded("core/date", str, "x", str, str)


async def test_a_context_source_outside_its_namespace_is_refused(tmp_path: Path) -> None:
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[Stray()]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        [status] = (await rt.execution.location(str(work))).plugins.statuses()
    assert status.error is not None and "must start with 'stray/'" in status.error
    assert "Today's date" in client.requests[0].system[-1]


async def test_nothing_is_awaited_without_plugins(tmp_path: Path) -> None:
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        plugins = (await rt.execution.location(str(work))).plugins
        request = client.requests[0]
        with trio.testing.assert_no_checkpoints():
            same = await plugins.transform_request(request, sid, "build")
    assert same is request and plugins.statuses() == []
    assert plugins.registry.hooks is None  # a tool call passes no hook at all


async def test_the_registry_has_hooks_only_while_a_plugin_implements_one(tmp_path: Path) -> None:
    client = ScriptedLLM([answer(), answer()])
    async with plugin_runtime(tmp_path, client, plugins=[Notes()]) as (rt, work):
        sid = await session(rt, work)
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)
        location = await rt.execution.location(str(work))
        assert location.registry.hooks is None  # Notes implements no tool hook
    async with plugin_runtime(tmp_path, client, plugins=[Shaper(), Tools(), Second()]) as (
        rt,
        work,
    ):
        location = await rt.execution.location(str(work))
        await location.ready()
        assert location.registry.hooks is None

    class Asking:
        @hookimpl
        def permission_ask(self) -> None:
            return None

    async with plugin_runtime(tmp_path, client, plugins=[Asking()]) as (rt, work):
        location = await rt.execution.location(str(work))
        await location.ready()
        assert location.registry.hooks is location.plugins


class Provides:
    """Offers a provider: the local chat-completions server."""

    name = "provides"

    def __init__(self, port: int) -> None:
        self.port = port

    @hookimpl
    def provider(self) -> dict[str, Any]:
        return {"plugged": local_provider(self.port, "echo-1")["local"]}


async def test_a_plugins_provider_answers_the_locations_turns(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    server = LocalServer()
    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    server.port = listeners[0].socket.getsockname()[1]
    server.queue(chat_text("from the plugin's provider"))
    client = ScriptedLLM([])  # the runtime's own client: never asked
    config = {"model": "plugged/echo-1"}
    clients = ProviderClients(llm.Catalog.from_models_dev({}), llm.Auth(env={}))
    configuration = Configuration(env={"HOME": str(tmp_path)}, llm_for=clients)
    try:
        async with plugin_runtime(
            tmp_path, client, config=config, plugins=[Provides(server.port)],
            configuration=configuration,
        ) as (rt, work):  # fmt: skip
            sid = await session(rt, work)
            await rt.sessions.prompt(sid, prompt=prompt("hi"))
            await rt.sessions.wait_idle(sid)
            history = await rt.sessions.context(sid)
    finally:
        await clients.aclose()
    assert client.requests == []
    [recorded] = server.requests
    assert recorded.json()["model"] == "echo-1"
    assert "from the plugin's provider" in str(history[-1])
