"""``StatusBoard``: a blocking prompt's answer waits for every V1 stream to send the idle
status, then ``SETTLE_GRACE`` more, so that OpenCode's ``run --attach`` reads the stream's
last events before the answer (tests/opencode/test_run_and_sdk.py runs the client)."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from actors import EventHub
from gateway.opencode._v1_events import SETTLE_GRACE, Idle, StatusBoard


async def test_an_answer_waits_for_every_stream_then_the_grace(autojump_clock: MockClock):
    idle = trio.Event()

    async def wait_idle(session_id: str) -> None:
        await idle.wait()

    hub = EventHub()
    async with trio.open_nursery() as nursery:
        board = StatusBoard(wait_idle, lambda: nursery)
        first, second = hub.subscribe(None), hub.subscribe(None)
        board.add(first)
        board.add(second)
        board.busy("ses_a")
        settled_at: list[float] = []

        async def answer() -> None:
            await board.settled("ses_a")
            settled_at.append(trio.current_time())

        nursery.start_soon(answer)
        await trio.sleep(1)
        idle.set()
        await trio.sleep(1)
        assert first.receive_nowait() == second.receive_nowait() == Idle("ses_a")
        board.delivered("ses_a", first)
        await trio.sleep(1)
        assert settled_at == []  # the second stream has not sent it yet
        sent = trio.current_time()
        board.delivered("ses_a", second)
    assert settled_at == [sent + SETTLE_GRACE]


async def test_without_streams_the_answer_does_not_wait(autojump_clock: MockClock):
    async with trio.open_nursery() as nursery:

        async def wait_idle(session_id: str) -> None:
            await trio.lowlevel.checkpoint()

        board = StatusBoard(wait_idle, lambda: nursery)
        board.busy("ses_a")
        await trio.sleep(1)
        start = trio.current_time()
        await board.settled("ses_a")
        assert trio.current_time() == start
