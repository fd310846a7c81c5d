"""An app failing while its request is cancelled: the error is logged, the cancellation
still propagates (it may arrive in one exception group with the error)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from hypercorn.config import Config

from gateway._tcp import _run_app


async def test_a_cancellation_grouped_with_an_app_error_is_not_swallowed() -> None:
    outer = trio.CancelScope()
    sent: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any, *runners: Any) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            await trio.testing.wait_all_tasks_blocked()
            outer.cancel()
            raise ValueError("app bug")  # with the sleeper's Cancelled: one group

    async def send(event: Any) -> None:
        sent.append(event)  # no checkpoint: only the app's exception can carry the cancel

    async def receive() -> Any:
        raise AssertionError("not read")

    with outer:
        await _run_app(app, Config(), {"type": "http"}, receive, send)  # type: ignore[arg-type]
    assert outer.cancelled_caught
    assert sent == [None]  # the protocol was still told the app is done
