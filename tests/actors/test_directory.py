from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from actors import (
    ActorDirectory,
    ActorNotFound,
    ActorTreeNode,
    DuplicateActor,
    Supervisor,
)

MakeActor = Callable[..., Any]
Cmd = Callable[[str], Any]


def shape(nodes: tuple[ActorTreeNode, ...]) -> list[object]:
    return [
        (node.statistics.id, node.statistics.kind, shape(node.children))
        if node.children
        else (node.statistics.id, node.statistics.kind)
        for node in nodes
    ]


class TestRegistry:
    def test_register_lookup_unregister(self, make_actor: MakeActor) -> None:
        directory = ActorDirectory()
        actor = make_actor("a")
        directory.register(actor)
        assert directory.lookup("a") is actor
        assert directory.get("a") is actor
        assert "a" in directory and len(directory) == 1
        directory.unregister("a")
        directory.unregister("a")
        assert directory.get("a") is None
        with pytest.raises(ActorNotFound, match="no live actor 'a'"):
            directory.lookup("a")

    def test_not_found_is_a_lookup_error(self) -> None:
        with pytest.raises(LookupError):
            ActorDirectory().lookup("x")

    def test_duplicate(self, make_actor: MakeActor) -> None:
        directory = ActorDirectory()
        directory.register(make_actor("a"))
        with pytest.raises(DuplicateActor):
            directory.register(make_actor("a"))


class TestTree:
    async def test_shape(
        self, root: Supervisor, directory: ActorDirectory, make_actor: MakeActor
    ) -> None:
        sessions = Supervisor("sessions", directory=directory)
        root.start_child(make_actor("storage"))
        root.start_child(sessions)
        await trio.testing.wait_all_tasks_blocked()
        sessions.start_child(make_actor("ses_1"))
        sessions.start_child(make_actor("ses_2"))
        await trio.testing.wait_all_tasks_blocked()
        assert shape(directory.tree()) == [
            (
                "root",
                "supervisor",
                [
                    ("storage", "script"),
                    ("sessions", "supervisor", [("ses_1", "script"), ("ses_2", "script")]),
                ],
            )
        ]
        [node] = directory.tree()
        assert node.statistics.state == "running"
        assert [s.id for s in directory.statistics()] == [
            "root",
            "storage",
            "sessions",
            "ses_1",
            "ses_2",
        ]

    async def test_passivated_children_leave_the_tree(
        self, root: Supervisor, directory: ActorDirectory, make_actor: MakeActor
    ) -> None:
        root.start_child(make_actor("ses_1"))
        await root.passivate_child("ses_1")
        assert shape(directory.tree()) == [("root", "supervisor")]

    async def test_orphans_become_roots(self, make_actor: MakeActor) -> None:
        directory = ActorDirectory()
        directory.register(make_actor("a"), parent="gone")
        assert shape(directory.tree()) == [("a", "script")]

    async def test_tree_encodes_to_json(
        self, root: Supervisor, directory: ActorDirectory, make_actor: MakeActor
    ) -> None:
        root.start_child(make_actor("a"))
        data = msgspec.json.decode(msgspec.json.encode(directory.tree()))
        assert data[0]["statistics"]["id"] == "root"
        assert data[0]["children"][0]["statistics"]["mailbox_bound"] == 4
        assert data[0]["statistics"]["mailbox_bound"] == 0
