from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from actors import (
    Actor,
    ActorDirectory,
    Reply,
    Supervisor,
    SupervisorPolicy,
    open_mailbox,
    run_root,
)

Command = tuple[str, Reply[str] | None]


class ScriptActor(Actor[Command]):
    """Serves string commands: ``echo:<text>``, ``boom``, ``hang``, ``stop``, ``do:<activity>``."""

    kind = "script"

    def __init__(self, actor_id: str, bound: int = 4) -> None:
        super().__init__(actor_id, mailbox=open_mailbox(bound), label=f"label of {actor_id}")
        self.runs = 0
        self.held: list[Reply[str]] = []

    async def run(self) -> None:
        self.runs += 1
        self.mark_running()
        while True:
            command, reply = await self.mailbox.receive()
            if command == "stop":
                return
            self._handle(command, reply)

    def _handle(self, command: str, reply: Reply[str] | None) -> None:
        if command == "boom":
            raise ValueError(f"boom in run {self.runs}")
        if command == "hang":
            assert reply is not None
            self.held.append(reply)
        elif command.startswith("do:"):
            self.set_activity(command[3:])
        elif reply is not None:
            reply.send(command.removeprefix("echo:"))


@pytest.fixture
def make_actor() -> Callable[..., ScriptActor]:
    return ScriptActor


@pytest.fixture
def directory() -> ActorDirectory:
    return ActorDirectory()


@pytest.fixture
async def root(nursery: trio.Nursery, directory: ActorDirectory) -> Supervisor:
    supervisor = Supervisor(
        "root", policy=SupervisorPolicy(max_restarts=2, within_seconds=10), directory=directory
    )
    directory.register(supervisor)
    await nursery.start(run_root, supervisor)
    return supervisor


def command(text: str) -> Callable[[Reply[Any]], Command]:
    """Make a message factory for ``call``: the command with the reply slot."""
    return lambda reply: (text, reply)


@pytest.fixture
def cmd() -> Callable[[str], Callable[[Reply[Any]], Command]]:
    return command
