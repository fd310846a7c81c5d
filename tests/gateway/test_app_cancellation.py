"""An app failing while its request is cancelled: the error is logged, the cancellation
still propagates (it may arrive in one exception group with the error)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from gateway.http._serve import ReraiseCancellation


async def test_a_cancellation_grouped_with_an_app_error_is_not_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outer = trio.CancelScope()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            await trio.testing.wait_all_tasks_blocked()
            outer.cancel()
            raise ValueError("app bug")  # with the sleeper's Cancelled: one group

    async def receive() -> Any:
        raise AssertionError("not read")

    async def send(event: Any) -> None:
        raise AssertionError("not sent")

    with caplog.at_level(logging.ERROR, "kittiwake.gateway"), outer:
        await ReraiseCancellation(app)({"type": "http"}, receive, send)  # type: ignore[arg-type]
    assert outer.cancelled_caught
    [record] = [r for r in caplog.records if r.name == "kittiwake.gateway"]
    assert record.exc_info is not None
    assert "app bug" in str(record.exc_info[1].exceptions)  # type: ignore[union-attr]


async def test_errors_alone_and_cancellations_alone_pass_through() -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        async with trio.open_nursery():
            raise ValueError("app bug")

    async def unused(*args: Any) -> Any:
        raise AssertionError("not called")

    with pytest.RaisesGroup(ValueError):
        await ReraiseCancellation(failing)({"type": "http"}, unused, unused)  # type: ignore[arg-type]

    async def sleeping(scope: Any, receive: Any, send: Any) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            await trio.sleep_forever()

    with trio.move_on_after(0.01) as scope:
        await ReraiseCancellation(sleeping)({"type": "http"}, unused, unused)  # type: ignore[arg-type]
    assert scope.cancelled_caught
