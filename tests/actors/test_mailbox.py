from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from actors import Mailbox, MailboxStatistics, Reply, open_mailbox


class TestOpen:
    def test_bounded(self) -> None:
        stats = open_mailbox(4).statistics()
        assert stats.bound == 4
        assert stats.unbounded_because is None

    def test_unbounded_requires_a_reason(self) -> None:
        with pytest.raises(TypeError, match="unbounded_because"):
            open_mailbox(math.inf)

    def test_unbounded_reason_must_not_be_blank(self) -> None:
        with pytest.raises(ValueError, match="blank"):
            open_mailbox(math.inf, unbounded_because="  ")

    def test_unbounded_with_reason(self) -> None:
        stats = open_mailbox(math.inf, unbounded_because="one wake per session").statistics()
        assert stats.bound is None
        assert stats.unbounded_because == "one wake per session"

    def test_reason_refused_for_a_bound(self) -> None:
        with pytest.raises(TypeError, match="only for"):
            open_mailbox(8, unbounded_because="why not")

    @pytest.mark.parametrize("bad", [-1, 2.5, True, "3"])
    def test_bad_bounds(self, bad: object) -> None:
        with pytest.raises(ValueError, match="max_buffer"):
            open_mailbox(bad)  # type: ignore[arg-type]


class TestBounded:
    async def test_send_nowait_raises_wouldblock_when_full(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(1)
        mailbox.send_nowait(1)
        with pytest.raises(trio.WouldBlock):
            mailbox.send_nowait(2)
        assert mailbox.statistics().messages_in == 1

    async def test_send_blocks_until_received(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(1)
        await mailbox.send(1)
        sent = []

        async def sender() -> None:
            await mailbox.send(2)
            sent.append(2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            assert sent == []
            assert mailbox.statistics().blocked_senders == 1
            assert await mailbox.receive() == 1
        assert sent == [2]
        assert await mailbox.receive() == 2

    async def test_receive_nowait_on_empty(self) -> None:
        with pytest.raises(trio.WouldBlock):
            open_mailbox(1).receive_nowait()

    async def test_fifo(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(3)
        for i in range(3):
            mailbox.send_nowait(i)
        assert [mailbox.receive_nowait() for _ in range(3)] == [0, 1, 2]

    async def test_sequence_numbers_count_sent_and_received_messages(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(3)
        assert (mailbox.sent, mailbox.received) == (0, 0)
        mailbox.send_nowait(1)
        await mailbox.send(2)
        assert (mailbox.sent, mailbox.received) == (2, 0)
        assert mailbox.receive_nowait() == 1
        assert (mailbox.sent, mailbox.received, mailbox.depth) == (2, 1, 1)


class TestStatistics:
    async def test_counts_and_peak(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(8)
        for i in range(5):
            await mailbox.send(i)
        for _ in range(4):
            await mailbox.receive()
        mailbox.send_nowait(9)
        assert mailbox.statistics() == MailboxStatistics(
            depth=2,
            bound=8,
            peak_depth=5,
            blocked_senders=0,
            waiting_receivers=0,
            messages_in=6,
            messages_out=4,
            closed=False,
        )

    async def test_waiting_receivers(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(mailbox.receive)
            await trio.testing.wait_all_tasks_blocked()
            assert mailbox.statistics().waiting_receivers == 1
            await mailbox.send(1)
        assert mailbox.statistics().messages_out == 1

    async def test_cancelled_send_is_not_counted(self, autojump_clock: object) -> None:
        mailbox: Mailbox[int] = open_mailbox(0)
        with trio.move_on_after(1):
            await mailbox.send(1)
        assert mailbox.statistics().messages_in == 0


class TestClose:
    async def test_close_breaks_senders(self) -> None:
        with open_mailbox(1) as mailbox:
            mailbox.send_nowait(1)
        assert mailbox.closed
        assert mailbox.statistics().closed
        with pytest.raises(trio.BrokenResourceError):
            await mailbox.send(2)
        with pytest.raises(trio.ClosedResourceError):
            await mailbox.receive()

    async def test_close_wakes_blocked_sender(self) -> None:
        mailbox: Mailbox[int] = open_mailbox(0)

        async def sender() -> None:
            with pytest.raises(trio.BrokenResourceError):
                await mailbox.send(1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            mailbox.close()


class TestReply:
    async def test_round_trip(self) -> None:
        mailbox: Mailbox[tuple[int, Reply[int]]] = open_mailbox(1)

        async def doubler() -> None:
            number, reply = await mailbox.receive()
            reply.send(number * 2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(doubler)
            reply: Reply[int] = Reply()
            await mailbox.send((21, reply))
            assert await reply.wait() == 42
            assert reply.settled

    async def test_fail_raises_in_caller(self) -> None:
        reply: Reply[int] = Reply()
        reply.fail(KeyError("nope"))
        with pytest.raises(KeyError, match="nope"):
            await reply.wait()

    async def test_answering_twice_is_a_bug(self) -> None:
        reply: Reply[int] = Reply()
        reply.send(1)
        with pytest.raises(RuntimeError, match="already answered"):
            reply.send(2)

    async def test_answer_to_abandoned_slot_is_dropped(self) -> None:
        reply: Reply[int] = Reply()
        reply._abandon()
        reply.send(1)
        assert reply.settled
