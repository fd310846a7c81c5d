"""A small model writes each new session's title beside its first turn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from runtime import Location, ModelRef, Prompt, llm, open_runtime
from runtime.events import StepEnded
from runtime.titles import TITLE_PROMPT, TitleLimits, default_title
from storage import StoredEvent
from tests.execution.conftest import answer, eventually

MAIN = ModelRef(id="big", provider_id="lab")
SMALL = ModelRef(id="small", provider_id="lab")


def small_model(model: ModelRef) -> ModelRef | None:
    return ModelRef(id="small", provider_id=model.provider_id)


class TitledLLM:
    """Answers turns at once; a title request answers *title* only once ``release`` is set
    (or fails, with ``fail``)."""

    def __init__(self, title: str = '"Fix the login redirect."', *, fail: str | None = None):
        self.title = title
        self.fail = fail
        self.release = trio.Event()
        self.title_asked = trio.Event()
        self.requests: list[llm.LLMRequest] = []

    def titles(self) -> list[llm.LLMRequest]:
        return [r for r in self.requests if r.system == [TITLE_PROMPT]]

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        self.requests.append(request)
        if request.system != [TITLE_PROMPT]:
            for event in answer("patched"):
                await trio.lowlevel.checkpoint()
                yield event
            return
        self.title_asked.set()
        await self.release.wait()
        if self.fail == "error":
            yield llm.ProviderError(kind="rate_limit", message="slow down")
            return
        if self.fail == "raise":
            raise ConnectionError("connection reset")
        for event in answer(self.title):
            yield event


async def _session_updates(rt, session_id: str, send: trio.MemorySendChannel[StoredEvent]):
    with rt.hub.subscribe(None) as sub:
        while True:
            item = await sub.receive()
            if isinstance(item, StoredEvent) and item.aggregate_id == session_id:
                if item.type == "session.updated":
                    await send.send(item)


async def test_a_new_session_gets_a_title_without_delaying_its_first_answer(tmp_path: Path):
    client = TitledLLM()
    work = tmp_path / "work"
    work.mkdir()
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, default_model=MAIN, title_model=small_model
    ) as rt:
        info = await rt.sessions.create(location=Location(directory=str(work)))
        assert info.title == default_title(info.id)
        send, updates = trio.open_memory_channel[StoredEvent](10)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_session_updates, rt, info.id, send)
            await rt.sessions.prompt(info.id, prompt=Prompt(text="the login page redirects twice"))
            # The first answer completes while the title request is still unanswered.
            await rt.sessions.wait_idle(info.id)
            assert client.title_asked.is_set()
            messages = await rt.sessions.context(info.id)
            assert [type(m).__name__ for m in messages] == ["UserMessage", "AssistantMessage"]
            assert messages[-1].content[0].text == "patched"
            assert (await rt.sessions.get(info.id)).title == default_title(info.id)
            client.release.set()
            with trio.fail_after(5):
                update = await updates.receive()
            nursery.cancel_scope.cancel()
        titled = await rt.sessions.get(info.id)
        assert titled.title == "Fix the login redirect"
        assert b'"title":"Fix the login redirect"' in update.data  # on the event stream
        (request,) = client.titles()
        assert request.model == llm.ModelRef(provider_id="lab", model_id="small")
        assert request.tools == [] and request.tool_choice == "none"
        text = request.messages[0].content[0].text
        assert "the login page redirects twice" in text
        main = [r for r in client.requests if r.system != [TITLE_PROMPT]]
        assert [r.model.model_id for r in main] == ["big"]
        # Later prompts write no new title.
        await rt.sessions.prompt(info.id, prompt=Prompt(text="and the logout page?"))
        await rt.sessions.wait_idle(info.id)
        assert len(client.titles()) == 1
    # The title is durable: a new runtime on the same store reads it.
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as again:
        assert (await again.sessions.get(info.id)).title == "Fix the login redirect"


async def test_no_title_for_a_child_session_or_one_with_a_title(tmp_path: Path):
    client = TitledLLM()
    client.release.set()
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, default_model=MAIN, title_model=small_model
    ) as rt:
        where = Location(directory=str(tmp_path))
        named = await rt.sessions.create(location=where, title="Release checklist")
        child = await rt.sessions.create(location=where, parent_id=named.id)
        for info in (named, child):
            await rt.sessions.prompt(info.id, prompt=Prompt(text="go"))
            await rt.sessions.wait_idle(info.id)
        await trio.testing.wait_all_tasks_blocked()
        assert client.titles() == []
        assert (await rt.sessions.get(named.id)).title == "Release checklist"
        assert (await rt.sessions.get(child.id)).title == default_title(child.id)
        assert len(client.requests) == 2


async def test_a_failed_title_is_logged_and_the_placeholder_stays(tmp_path: Path, caplog):
    caplog.set_level(logging.WARNING, logger="kittiwake.titles")
    for fail in ("error", "raise", "empty"):
        client = TitledLLM(title="  \n", fail=None if fail == "empty" else fail)
        client.release.set()
        data = tmp_path / fail
        async with open_runtime(
            data_dir=data, llm=client, default_model=MAIN, title_model=small_model
        ) as rt:
            info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
            await rt.sessions.prompt(info.id, prompt=Prompt(text="hello"))
            await rt.sessions.wait_idle(info.id)
            await trio.testing.wait_all_tasks_blocked()
            assert len(client.titles()) == 1
            assert (await rt.sessions.get(info.id)).title == default_title(info.id)
            events, _ = await rt.sessions.history(info.id)
            assert isinstance(events[-1].event, StepEnded)  # the turn is unharmed
    messages = [r.getMessage() for r in caplog.records if r.name == "kittiwake.titles"]
    assert messages.count("title not written: the request failed") == 2
    assert messages.count("title not written: empty answer") == 1


async def test_a_title_request_that_never_answers_is_abandoned(tmp_path: Path, caplog):
    caplog.set_level(logging.WARNING, logger="kittiwake.titles")
    client = TitledLLM()  # never released
    limits = TitleLimits(timeout=0.2)
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, default_model=MAIN, title_model=small_model,
        title_limits=limits,
    ) as rt:  # fmt: skip
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        await rt.sessions.prompt(info.id, prompt=Prompt(text="hello"))
        await rt.sessions.wait_idle(info.id)
        await eventually(lambda: any("no answer in time" in r.getMessage() for r in caplog.records))
        assert (await rt.sessions.get(info.id)).title == default_title(info.id)


async def test_without_a_title_model_no_title_is_asked(tmp_path: Path):
    client = TitledLLM()
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        await rt.sessions.prompt(info.id, prompt=Prompt(text="hello"))
        await rt.sessions.wait_idle(info.id)
        await trio.testing.wait_all_tasks_blocked()
    assert client.titles() == [] and len(client.requests) == 1
