"""A served runtime and a Chromium tab on its web app, for the web app's browser tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from runtime import Location, Prompt
from runtime.llm import LLMEvent, LLMRequest, ScriptedLLM, StepFinish, StepStart, ToolCall, Usage
from tests.gateway.conftest import Served, served
from tests.web.cdp import Browser, Page, chromium

HOLD: Any = object()
"""In a ``HeldLLM`` script: the stream stops here until ``release`` is set (or it is
cancelled: an interrupt)."""


class HeldLLM(ScriptedLLM):
    """The scripted client, whose scripts may stop mid-stream at ``HOLD``."""

    def __init__(self, scripts: Sequence[Sequence[Any]], **options: Any) -> None:
        super().__init__(scripts, **options)
        self.holding = trio.Event()
        self.release = trio.Event()

    async def stream(self, request: LLMRequest) -> Any:
        async with aclosing(super().stream(request)) as events:
            async for event in events:
                if event is HOLD:
                    self.holding.set()
                    await self.release.wait()
                    continue
                yield event


def call(call_id: str, name: str, data: dict[str, Any]) -> list[LLMEvent]:
    """One provider step that calls the tool *name* with *data*."""
    return [
        StepStart(),
        ToolCall(call_id=call_id, name=name, input=data),
        StepFinish(finish_reason="tool-calls", usage=Usage(input_tokens=7, output_tokens=5)),
    ]


async def long_session(rt: Any, directory: Path, rounds: int, prompts: int = 999) -> str:
    """A session of about ``rounds * (prompts + 1)`` messages, written through the runtime:
    each round admits *prompts* prompts at once and waits until the session is idle (the
    first prompt of a round may open a turn of its own before the rest are taken in together,
    so a round holds one or two answers). The prompts say ``p<round>.<n>``; needs a client
    that answers every turn."""
    sid = str((await rt.sessions.create(location=Location(directory=str(directory)))).id)
    for r in range(rounds):
        async with trio.open_nursery() as nursery:
            for n in range(prompts):
                nursery.start_soon(
                    partial(rt.sessions.prompt, sid, prompt=Prompt(text=f"p{r}.{n}"))
                )
        await rt.sessions.wait_idle(sid)
    return sid


@dataclass
class Web:
    g: Served
    browser: Browser
    client: httpx.AsyncClient
    page: Page
    work: Path

    async def session(self, directory: Path | None = None, **body: Any) -> str:
        where = directory or self.work
        r = await self.client.post(
            "/api/session", json={"location": {"directory": str(where)}, **body}
        )
        assert r.status_code == 200, r.text
        return str(r.json()["data"]["id"])

    async def open(self, sid: str) -> None:
        """Show *sid* in the tab and wait until its timeline is drawn and caught up."""
        await self.page.evaluate(f"location.hash = '#/session/{sid}'")
        await self.page.until(f"document.body.dataset.session === '{sid}'")

    async def messages(self) -> list[str]:
        return list(await self.page.evaluate(
            "[...document.querySelectorAll('#messages .msg')].map(m => m.innerText)"
        ))  # fmt: skip


@asynccontextmanager
async def web(tmp_path: Path, llm: ScriptedLLM | None = None, **options: Any) -> AsyncIterator[Web]:
    """A served runtime, an HTTP client and a Chromium tab showing its web app (live); with
    a ``password`` option, the client and the tab give it."""
    password = options.get("password")
    auth = ("me", password) if password else None
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    async with (
        served(tmp_path, llm=llm, **options) as g,
        httpx.AsyncClient(base_url=g.url, timeout=30, auth=auth) as client,
        chromium(tmp_path / "profile") as browser,
    ):
        page = await browser.new_page()
        await page.goto(g.url.replace("://", f"://me:{password}@" if password else "://") + "/")
        await page.until("document.getElementById('conn').dataset.state === 'live'")
        yield Web(g=g, browser=browser, client=client, page=page, work=work)
        assert page.exceptions == [], page.exceptions
        assert page.policy_violations() == [], page.policy_violations()
