from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import (
    ActorCrashed,
    ActorStatistics,
    ActorStopped,
    Reply,
    Supervisor,
    call,
)

MakeActor = Callable[..., Any]
Cmd = Callable[[str], Any]


class TestCall:
    async def test_round_trip(self, root: Supervisor, make_actor: MakeActor, cmd: Cmd) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        assert await call(actor, cmd("echo:hello")) == "hello"

    async def test_call_before_running_is_queued(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, actor, cmd("echo:early"))
            await trio.testing.wait_all_tasks_blocked()
            assert actor.mailbox.statistics().depth == 1
            root.start_child(actor)

    async def test_crash_mid_call_raises_actor_crashed(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        with pytest.raises(ActorCrashed, match="boom in run 1") as info:
            await call(actor, cmd("boom"))
        assert info.value.actor_id == "a"
        assert isinstance(info.value.__cause__, ValueError)
        assert await call(actor, cmd("echo:again")) == "again"
        assert actor.runs == 2

    async def test_crash_fails_every_waiting_call(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        errors: list[BaseException] = []

        async def waiting_call() -> None:
            try:
                await call(actor, cmd("hang"))
            except ActorCrashed as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_call)
            nursery.start_soon(waiting_call)
            await trio.testing.wait_all_tasks_blocked()
            await actor.mailbox.send(("boom", None))
        assert len(errors) == 2
        assert actor._pending == set()

    async def test_stopped_actor_raises_actor_stopped(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        await root.stop_child("a")
        with pytest.raises(ActorStopped, match="'a' is stopped"):
            await call(actor, cmd("echo:late"))

    async def test_stop_while_waiting_raises_actor_stopped(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        async with trio.open_nursery() as nursery:

            async def caller() -> None:
                with pytest.raises(ActorStopped):
                    await call(actor, cmd("hang"))

            nursery.start_soon(caller)
            await trio.testing.wait_all_tasks_blocked()
            await root.stop_child("a")

    async def test_blocked_send_to_closing_mailbox_raises_actor_stopped(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a", bound=0)
        async with trio.open_nursery() as nursery:

            async def caller() -> None:
                with pytest.raises(ActorStopped):
                    await call(actor, cmd("echo:x"))

            nursery.start_soon(caller)
            await trio.testing.wait_all_tasks_blocked()
            actor._release("stopped")

    async def test_cancelled_caller_abandons_the_slot(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd, autojump_clock: MockClock
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        with trio.move_on_after(5):
            await call(actor, cmd("hang"))
        assert actor._pending == set()
        [reply] = actor.held
        assert reply.settled
        reply.send("too late")  # dropped, does not hurt the actor
        assert await call(actor, cmd("echo:fine")) == "fine"

    async def test_actor_may_answer_with_an_error(self) -> None:
        reply: Reply[str] = Reply()
        reply.fail(LookupError("no such session"))
        with pytest.raises(LookupError):
            await reply.wait()


class TestStatistics:
    async def test_fresh_actor(self, make_actor: MakeActor) -> None:
        stats = make_actor("a").statistics()
        assert stats.state == "starting"
        assert stats.age == 0
        assert stats.restart_budget is None

    async def test_snapshot(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd, autojump_clock: MockClock
    ) -> None:
        actor = make_actor("a", bound=8)
        root.start_child(actor)
        await trio.sleep(3)
        with pytest.raises(ActorCrashed):
            await call(actor, cmd("boom"))
        await actor.mailbox.send(("do:provider turn 3/25", None))
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(2)
        stats = actor.statistics()
        assert stats.last_death_cause is not None
        assert "ValueError: boom in run 1" in stats.last_death_cause
        assert msgspec.structs.asdict(stats) == msgspec.structs.asdict(
            ActorStatistics(
                id="a",
                kind="script",
                label="label of a",
                state="running",
                mailbox_depth=0,
                mailbox_bound=8,
                mailbox_peak=0,
                blocked_senders=0,
                messages_in=2,
                messages_out=2,
                restarts=1,
                last_death_cause=stats.last_death_cause,
                restart_budget=1,
                current_activity="provider turn 3/25",
                since=trio.current_time() - 2,
                phase_seconds=2.0,
                age=5.0,
            )
        )

    async def test_restart_budget_recovers_after_the_window(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd, autojump_clock: MockClock
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        assert actor.statistics().restart_budget == 2
        with pytest.raises(ActorCrashed):
            await call(actor, cmd("boom"))
        assert actor.statistics().restart_budget == 1
        await trio.sleep(10)
        assert actor.statistics().restart_budget == 2

    async def test_task_is_exposed_while_running(
        self, root: Supervisor, make_actor: MakeActor
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.task is not None
        assert actor.task.name == "actor:a"
        await root.stop_child("a")
        assert actor.task is None
