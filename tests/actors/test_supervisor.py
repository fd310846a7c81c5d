from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import (
    ActorCrashed,
    ActorDirectory,
    ActorNotFound,
    DuplicateActor,
    Escalation,
    Supervisor,
    SupervisorPolicy,
    call,
    run_root,
)

MakeActor = Callable[..., Any]
Cmd = Callable[[str], Any]


class TestPolicy:
    def test_validates(self) -> None:
        with pytest.raises(ValueError, match="max_restarts"):
            SupervisorPolicy(-1, 5)
        with pytest.raises(ValueError, match="within_seconds"):
            SupervisorPolicy(1, 0)

    def test_positional(self) -> None:
        assert SupervisorPolicy(3, 5.0) == SupervisorPolicy(max_restarts=3, within_seconds=5.0)


class TestRestart:
    async def test_crashing_child_is_restarted_and_counted(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        for _ in range(2):
            with pytest.raises(ActorCrashed):
                await call(actor, cmd("boom"))
        await trio.testing.wait_all_tasks_blocked()
        assert actor.runs == 3
        assert actor.statistics().restarts == 2
        assert actor.state == "running"

    async def test_restart_keeps_queued_messages(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        actor.mailbox.send_nowait(("boom", None))
        actor.mailbox.send_nowait(("do:after restart", None))
        root.start_child(actor)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.runs == 2
        assert actor.current_activity == "after restart"

    async def test_state_is_restarting_until_marked_running(self, root: Supervisor) -> None:
        gate = trio.Event()

        class SlowStart(Supervisor):  # its second run waits on the gate
            runs = 0

            async def start_initial_children(self) -> None:
                self.runs += 1
                if self.runs == 1:
                    raise ValueError("first run fails")
                await gate.wait()

        child = SlowStart("slow")
        root.start_child(child)
        await trio.testing.wait_all_tasks_blocked()
        assert child.state == "restarting"
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert child.state == "running"

    async def test_clean_exit_is_not_a_restart(
        self, root: Supervisor, make_actor: MakeActor, directory: ActorDirectory
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        await actor.mailbox.send(("stop", None))
        await trio.testing.wait_all_tasks_blocked()
        assert actor.state == "stopped"
        assert actor.runs == 1
        assert actor.statistics().restarts == 0
        assert root.children() == ()
        assert "a" not in directory
        assert actor.mailbox.closed


class TestIntensity:
    async def test_too_many_crashes_escalate(
        self, make_actor: MakeActor, cmd: Cmd, autojump_clock: MockClock
    ) -> None:
        root = Supervisor("root", policy=SupervisorPolicy(max_restarts=2, within_seconds=10))
        actor = make_actor("a")
        other = make_actor("b")
        with pytest.RaisesGroup(Escalation, flatten_subgroups=True) as info:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_root, root)
                root.start_child(actor)
                root.start_child(other)
                for _ in range(3):
                    await trio.sleep(1)
                    with pytest.raises(ActorCrashed):
                        await call(actor, cmd("boom"))
                await trio.sleep_forever()
        [escalation] = info.value.exceptions
        assert "gives up on 'a': 3 crashes within 10 s" in str(escalation)
        assert isinstance(escalation.__cause__, ValueError)
        assert (actor.state, other.state, root.state) == ("dead", "stopped", "dead")
        assert actor.statistics().restart_budget == 0

    async def test_crashes_spread_out_do_not_escalate(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd, autojump_clock: MockClock
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        for _ in range(6):
            with pytest.raises(ActorCrashed):
                await call(actor, cmd("boom"))
            await trio.sleep(5.5)
        assert actor.statistics().restarts == 6
        assert actor.state == "running"

    async def test_zero_restarts_escalates_on_first_crash(self, make_actor: MakeActor) -> None:
        root = Supervisor("root", policy=SupervisorPolicy(0, 1))
        with pytest.RaisesGroup(Escalation, flatten_subgroups=True):
            async with trio.open_nursery() as nursery:
                await nursery.start(run_root, root)
                actor = make_actor("a")
                actor.mailbox.send_nowait(("boom", None))
                root.start_child(actor)

    async def test_parent_restarts_an_escalating_supervisor(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        inner = Supervisor("inner", policy=SupervisorPolicy(0, 10))
        root.start_child(inner)
        await trio.testing.wait_all_tasks_blocked()
        actor = make_actor("a")
        inner.start_child(actor)
        with pytest.raises(ActorCrashed):
            await call(actor, cmd("boom"))
        await trio.testing.wait_all_tasks_blocked()
        assert actor.state == "dead"
        assert inner.state == "running"
        assert inner.statistics().restarts == 1
        assert "Escalation" in (inner.statistics().last_death_cause or "")
        assert inner.children() == ()


class TestDynamicChildren:
    async def test_stop_child(self, root: Supervisor, make_actor: MakeActor) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        await root.stop_child("a")
        assert actor.state == "stopped"
        assert actor.runs == 1
        with pytest.raises(RuntimeError, match="cannot be started again"):
            root.start_child(actor)

    async def test_passivate_and_reactivate(
        self, root: Supervisor, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        actor = make_actor("a")
        root.start_child(actor)
        await trio.testing.wait_all_tasks_blocked()
        await root.passivate_child("a")
        assert actor.state == "passivated"
        assert root.children() == ()
        actor.mailbox.send_nowait(("do:woken", None))
        root.start_child(actor)
        assert await call(actor, cmd("echo:back")) == "back"
        assert actor.current_activity == "woken"
        assert actor.runs == 2
        assert actor.statistics().restarts == 0

    async def test_unknown_child(self, root: Supervisor) -> None:
        with pytest.raises(ActorNotFound):
            await root.stop_child("nobody")

    async def test_duplicate_id(
        self, root: Supervisor, make_actor: MakeActor, directory: ActorDirectory
    ) -> None:
        root.start_child(make_actor("a"))
        with pytest.raises(DuplicateActor):
            root.start_child(make_actor("a"))
        assert len(root.children()) == 1

    async def test_running_actor_cannot_join_a_second_supervisor(
        self, root: Supervisor, make_actor: MakeActor
    ) -> None:
        other = Supervisor("other")
        root.start_child(other)
        await trio.testing.wait_all_tasks_blocked()
        actor = make_actor("a")
        root.start_child(actor)
        with pytest.raises(RuntimeError, match="already running"):
            other.start_child(actor)
        assert other.children() == ()

    async def test_supervisor_must_run_before_starting_children(
        self, make_actor: MakeActor
    ) -> None:
        with pytest.raises(RuntimeError, match="not running"):
            Supervisor("idle").start_child(make_actor("a"))

    async def test_children_in_start_order(self, root: Supervisor, make_actor: MakeActor) -> None:
        for name in "cab":
            root.start_child(make_actor(name))
        assert [child.id for child in root.children()] == ["c", "a", "b"]


class TestCancellation:
    async def test_cancelling_the_root_stops_everyone(
        self, make_actor: MakeActor, cmd: Cmd
    ) -> None:
        root = Supervisor("root")
        actor = make_actor("a")
        async with trio.open_nursery() as nursery:
            await nursery.start(run_root, root)
            root.start_child(actor)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert (root.state, actor.state) == ("stopped", "stopped")
        assert actor.runs == 1
        assert actor.statistics().restarts == 0

    async def test_outer_cancellation_propagates_through_the_tree(
        self, make_actor: MakeActor
    ) -> None:
        root = Supervisor("root")
        actor = make_actor("a")
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_root, root)
                root.start_child(actor)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
        assert actor.state == "stopped"

    async def test_root_crash_propagates_without_restart(self, make_actor: MakeActor) -> None:
        actor = make_actor("solo")
        actor.mailbox.send_nowait(("boom", None))
        with pytest.RaisesGroup(ValueError):
            async with trio.open_nursery() as nursery:
                await nursery.start(run_root, actor)
        assert actor.state == "dead"
        assert actor.runs == 1
