"""``chat_message``: the plugins see each user message once, before its durable write, and
what they return is what is stored and sent to the model; a failing hook is reported and
skipped (a required plugin's refuses the prompt, storing nothing); an exact retry is
answered by the store without asking them again."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio

from actors import Notice
from gateway import Server, serve
from runtime import OperationUnavailableError, Prompt, UserMessage
from runtime.llm import LLMRequest, ScriptedLLM, TextPart
from runtime.llm import UserMessage as LLMUserMessage
from runtime.plugins import ChatMessage, PluginContext, hookimpl
from storage import AdmittedInput, PendingInputs
from tests.execution.conftest import answer
from tests.plugins.conftest import plugin_runtime, session
from tests.plugins.test_isolation import FAST, notices
from tests.waiting import eventually


class Ticket:
    """Appends the ticket it is told of to every prompt, numbering its calls (so a second
    call would store something else)."""

    name = "ticket"

    def __init__(self) -> None:
        self.seen: list[tuple[ChatMessage, Prompt]] = []

    @hookimpl
    async def chat_message(self, message: ChatMessage, prompt: Prompt) -> Prompt:
        self.seen.append((message, prompt))
        text = f"{prompt.text}\n\n[ticket KW-7, call {len(self.seen)}]"
        return msgspec.structs.replace(prompt, text=text)


class Shouting:
    """Sees what the plugin before it returned."""

    name = "shouting"

    @hookimpl
    def chat_message(self, prompt: Prompt) -> Prompt:
        return msgspec.structs.replace(prompt, text=prompt.text.upper())


class Raising:
    name = "raising"

    @hookimpl
    def chat_message(self, prompt: Prompt) -> Prompt:
        raise RuntimeError("no ticket system")


class Hanging:
    name = "hanging"

    @hookimpl
    async def chat_message(self, prompt: Prompt) -> Prompt:
        await trio.sleep_forever()
        return prompt


class Emptying:
    name = "emptying"

    @hookimpl
    def chat_message(self, prompt: Prompt) -> Prompt:
        return Prompt(text="   ")


class RequiredRaising:
    name = "required-ticket"
    required = True

    @hookimpl
    def chat_message(self, prompt: Prompt) -> Prompt:
        raise RuntimeError("ticket system unreachable")


def sent_text(request: LLMRequest) -> str:
    """The text of the last user message of a provider request."""
    users = [m for m in request.messages if isinstance(m, LLMUserMessage)]
    return "\n".join(p.text for p in users[-1].content if isinstance(p, TextPart))


async def stored_texts(rt: Any, sid: str) -> list[str]:
    page = await rt.sessions.messages(sid, order="asc")
    return [m.text for m in page.data if isinstance(m, UserMessage)]


async def test_the_plugins_change_the_stored_and_sent_prompt_in_load_order(
    tmp_path: Path,
) -> None:
    ticket = Ticket()
    client = ScriptedLLM([answer()])
    async with plugin_runtime(tmp_path, client, plugins=[ticket, Shouting()]) as (rt, work):
        sid = await session(rt, work)
        receipt = await rt.sessions.prompt(sid, prompt=Prompt(text="fix it"), delivery="queue")
        await rt.sessions.wait_idle(sid)
        stored = await stored_texts(rt, sid)
    expected = "FIX IT\n\n[TICKET KW-7, CALL 1]"
    assert receipt.prompt.text == expected and stored == [expected]
    assert sent_text(client.requests[0]) == expected
    [(message, asked)] = ticket.seen
    assert asked == Prompt(text="fix it")
    assert message == ChatMessage(
        session_id=sid, message_id=receipt.id, directory=str(work), agent="build",
        provider_id=client.requests[0].model.provider_id,
        model_id=client.requests[0].model.model_id, delivery="queue",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("plugin", "error"),
    [
        (Raising(), "RuntimeError: no ticket system"),
        (Hanging(), "timed out after 0.2 s"),
        (Emptying(), "answered a prompt that cannot be admitted: Prompt text is empty"),
    ],
)
async def test_a_failing_hook_is_reported_and_skipped(
    tmp_path: Path, plugin: Any, error: str
) -> None:
    client = ScriptedLLM([answer("done")])
    received: list[Notice] = []
    async with plugin_runtime(tmp_path, client, plugins=[plugin], plugin_limits=FAST) as (
        rt,
        work,
    ):
        async with trio.open_nursery() as nursery:
            await nursery.start(notices, rt, received)
            sid = await session(rt, work)
            receipt = await rt.sessions.prompt(sid, prompt=Prompt(text="fix it"))
            await rt.sessions.wait_idle(sid)
            await eventually(lambda: len(received) == 1)
            nursery.cancel_scope.cancel()
        stored = await stored_texts(rt, sid)
        history = await rt.sessions.context(sid)
        [status] = (await rt.execution.location(str(work))).plugins.statuses()
    assert receipt.prompt == Prompt(text="fix it") and stored == ["fix it"]
    assert sent_text(client.requests[0]) == "fix it"
    assert "done" in str(history[-1])  # the turn completed
    [notice] = received
    assert notice.properties == {
        "name": plugin.name, "hook": "chat_message", "error": error, "required": False
    }  # fmt: skip
    assert status.error == f"chat_message: {error}" and status.state == "ready"


async def test_an_exact_retry_is_not_asked_again_nor_admitted_twice(tmp_path: Path) -> None:
    ticket = Ticket()
    client = ScriptedLLM([answer(), answer()])
    async with plugin_runtime(tmp_path, client, plugins=[ticket]) as (rt, work):
        sid = await session(rt, work)
        first = await rt.sessions.prompt(sid, prompt=Prompt(text="fix it"), id="msg_fix1")
        again = await rt.sessions.prompt(sid, prompt=Prompt(text="fix it"), id="msg_fix1")
        await rt.sessions.wait_idle(sid)
        promoted = await rt.sessions.prompt(sid, prompt=Prompt(text="fix it"), id="msg_fix1")
        await rt.sessions.wait_idle(sid)
        stored = await stored_texts(rt, sid)
    expected = "fix it\n\n[ticket KW-7, call 1]"
    assert len(ticket.seen) == 1
    assert first.prompt.text == again.prompt.text == promoted.prompt.text == expected
    assert first.admitted_seq == again.admitted_seq == promoted.admitted_seq
    assert isinstance(promoted.promoted_seq, int)
    assert stored == [expected] and len(client.requests) == 1


async def test_a_required_plugins_failing_hook_refuses_the_prompt(tmp_path: Path) -> None:
    client = ScriptedLLM([answer()])
    received: list[Notice] = []
    plugins = [RequiredRaising()]
    async with plugin_runtime(tmp_path, client, plugins=plugins) as (rt, work):
        async with trio.open_nursery() as nursery:
            await nursery.start(notices, rt, received)
            sid = await session(rt, work)
            with pytest.raises(OperationUnavailableError) as refused:
                await rt.sessions.prompt(sid, prompt=Prompt(text="fix it"), id="msg_fix1")
            await eventually(lambda: len(received) == 1)
            nursery.cancel_scope.cancel()
        pending = await rt.storage.read(PendingInputs(session_id=sid))
        row = await rt.storage.read(AdmittedInput(message_id="msg_fix1"))
        stored = await stored_texts(rt, sid)
    assert refused.value.message == (
        "The prompt was not admitted: required plugin required-ticket failed in "
        "chat_message: RuntimeError: ticket system unreachable"
    )
    assert pending == [] and row is None and stored == [] and client.requests == []
    assert received[0].properties["required"] is True


async def test_a_prompt_waits_for_a_loading_plugin_that_may_shape_it(tmp_path: Path) -> None:
    go = trio.Event()
    client = ScriptedLLM([answer()])

    async def factory(context: PluginContext, options: dict[str, Any]) -> Ticket:
        await go.wait()  # what a factory makes is known once it ran
        return Ticket()

    async with plugin_runtime(tmp_path, client, plugins=[factory]) as (rt, work):
        sid = await session(rt, work)
        receipts: list[Any] = []

        async def admit() -> None:
            receipts.append(await rt.sessions.prompt(sid, prompt=Prompt(text="fix it")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(admit)
            location = await rt.execution.location(str(work))
            await eventually(lambda: [s.state for s in location.plugins.statuses()] == ["loading"])
            assert receipts == [] and await stored_texts(rt, sid) == []
            go.set()
        await rt.sessions.wait_idle(sid)
    assert receipts[0].prompt.text == "fix it\n\n[ticket KW-7, call 1]"
    assert sent_text(client.requests[0]) == receipts[0].prompt.text


async def test_every_http_surface_admits_the_plugins_prompt(tmp_path: Path) -> None:
    ticket = Ticket()
    client = ScriptedLLM([answer(), answer()])
    async with plugin_runtime(tmp_path, client, plugins=[ticket]) as (rt, work):
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
            sid = await session(rt, work)
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                body = {"prompt": {"text": "v2"}, "id": "msg_v2"}
                v2 = await http.post(f"/api/session/{sid}/prompt", json=body)
                retried = await http.post(f"/api/session/{sid}/prompt", json=body)
                await rt.sessions.wait_idle(sid)
                v1 = await http.post(
                    f"/session/{sid}/prompt_async",
                    json={"parts": [{"type": "text", "text": "v1"}], "messageID": "msg_v1"},
                )
                await eventually(lambda: len(client.requests) == 2)
                await rt.sessions.wait_idle(sid)
            server.stop()
        stored = await stored_texts(rt, sid)
    assert v2.status_code == 200 and retried.status_code == 200 and v1.status_code == 204
    retried_data = {k: v for k, v in retried.json()["data"].items() if k != "promotedSeq"}
    assert v2.json()["data"] == retried_data  # promotedSeq once it was promoted meanwhile
    assert stored == ["v2\n\n[ticket KW-7, call 1]", "v1\n\n[ticket KW-7, call 2]"]
    assert [sent_text(r) for r in client.requests] == stored


async def test_http_answers_a_refused_prompt_with_a_clear_error(tmp_path: Path) -> None:
    client = ScriptedLLM([])
    async with plugin_runtime(tmp_path, client, plugins=[RequiredRaising()]) as (rt, work):
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
            sid = await session(rt, work)
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                refused = await http.post(
                    f"/api/session/{sid}/prompt", json={"prompt": {"text": "x"}}
                )
            server.stop()
        stored = await stored_texts(rt, sid)
    assert refused.status_code == 503, refused.text
    assert refused.json()["_tag"] == "ServiceUnavailableError"
    assert "required plugin required-ticket failed in chat_message" in refused.json()["message"]
    assert stored == []
