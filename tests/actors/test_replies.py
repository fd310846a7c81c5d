"""AwaitedReplies: a reply in doubt makes the waiting call read the store's answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from actors.session._replies import AwaitedReplies, Stored


async def test_a_doubt_with_nothing_stored_waits_on_for_the_reply() -> None:
    replies: AwaitedReplies[str] = AwaitedReplies()
    stored: list[Stored[str] | None] = [None]
    reads = 0

    async def read() -> Stored[str] | None:
        nonlocal reads
        reads += 1
        return stored[0]

    replies.expect("r1")
    got: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _collect(replies, "r1", read, got))
        await trio.testing.wait_all_tasks_blocked()
        replies.doubt("r1")  # the write failed and nothing reached the store
        await trio.testing.wait_all_tasks_blocked()
        assert reads == 1 and got == []
        stored[0] = Stored("once")  # a later doubt finds the answer the store now holds
        replies.doubt("r1")
    assert got == ["once"] and reads == 2
    assert replies.answered("r1")
    replies.forget("r1")
    assert not replies.answered("r1")
    assert replies.deliver("r1", "reject") is False  # nobody waits: nothing is kept
    assert not replies.answered("r1")


async def test_the_first_reply_stands() -> None:
    replies: AwaitedReplies[str | None] = AwaitedReplies()

    async def read() -> Stored[str | None] | None:
        raise AssertionError("a delivered reply needs no read")

    replies.expect("r1")
    assert replies.deliver("r1", None) is True  # a rejection, from another worker
    assert replies.deliver("r1", "answer") is True
    assert await replies.wait("r1", read) is None


def test_stored_reads_are_bounded_below() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        AwaitedReplies(stored_reads=0)


async def _collect(
    replies: AwaitedReplies[str],
    request_id: str,
    read: Callable[[], Awaitable[Stored[str] | None]],
    got: list[str],
) -> None:
    got.append(await replies.wait(request_id, read))
