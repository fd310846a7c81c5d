import pytest
import trio
import trio.testing

from runtime.agents import (
    BUILD,
    PLAN,
    PermissionRequest,
    PermissionRule,
    evaluate,
    is_wholly_denied,
    load_agents,
    rules_from_config,
)
from runtime.tools import ToolContext, ToolEnvironment, ToolFailure, ToolSuccess, location_registry


class RecordingGate:
    """A client that answers every request with *reply*, once *release* is set."""

    def __init__(self, reply="once", release: trio.Event | None = None):
        self.reply = reply
        self.release = release
        self.requests: list[PermissionRequest] = []
        self.asked = trio.Event()

    async def ask(self, request: PermissionRequest):
        self.requests.append(request)
        self.asked.set()
        if self.release is not None:
            await self.release.wait()
        else:
            await trio.lowlevel.checkpoint()
        return self.reply


class MemoryApprovals:
    def __init__(self, approved=()):
        self.approved = set(approved)
        self.asked: list[tuple[str, str, str]] = []

    async def is_approved(self, project, permission, resource):
        await trio.lowlevel.checkpoint()
        self.asked.append((project, permission, resource))
        return (project, permission, resource) in self.approved

    async def save(self, project, permission, resource):
        await trio.lowlevel.checkpoint()
        self.approved.add((project, permission, resource))


def _ctx(tmp_path, call="call_1") -> ToolContext:
    return ToolContext(
        session_id="ses_1",
        agent="build",
        assistant_message_id="msg_1",
        tool_call_id=call,
        directory=str(tmp_path),
    )


def _registry(tmp_path, approvals=None):
    env = ToolEnvironment(directory=str(tmp_path), data_dir=str(tmp_path / "data"))
    return location_registry(env, saved_approvals=approvals)


R = PermissionRule


def test_last_matching_rule_wins_and_no_match_asks():
    rules = [
        R(permission="bash", action="ask"),
        R(permission="bash", pattern="git *", action="allow"),
    ]
    assert evaluate(rules, set(), "bash", ["git status"]) == "allow"
    assert evaluate(rules, set(), "bash", ["rm -rf x"]) == "ask"
    assert evaluate(rules, set(), "read", ["a.txt"]) == "ask"
    flipped = [*rules, R(permission="b*", pattern="git push*", action="deny")]
    assert evaluate(flipped, set(), "bash", ["git status", "git push origin"]) == "deny"


def test_saved_approval_turns_ask_into_allow_but_never_beats_a_deny():
    rules = [
        R(permission="edit", action="ask"),
        R(permission="edit", pattern="*.lock", action="deny"),
    ]
    saved = {("edit", "a.py"), ("edit", "b.lock")}
    assert evaluate(rules, saved, "edit", ["a.py"]) == "allow"
    assert evaluate(rules, saved, "edit", ["b.lock"]) == "deny"
    assert evaluate(rules, saved, "edit", ["a.py", "c.py"]) == "ask"


def test_rules_from_config_and_wholly_denied():
    rules = rules_from_config({"edit": "deny", "bash": {"*": "deny", "git *": "allow"}})
    assert rules == [
        R(permission="edit", action="deny"),
        R(permission="bash", pattern="*", action="deny"),
        R(permission="bash", pattern="git *", action="allow"),
    ]
    assert is_wholly_denied(rules, "edit")
    assert not is_wholly_denied(rules, "bash")
    assert rules_from_config("allow") == [R(permission="*", action="allow")]
    with pytest.raises(ValueError, match="Unknown permission action"):
        rules_from_config({"edit": "maybe"})


WRITES = [
    ("write", {"filePath": "f.txt", "content": "x"}),
    ("edit", {"filePath": "f.txt", "oldString": "a", "newString": "b"}),
    ("apply_patch", {"patchText": "*** Begin Patch\n*** Add File: g.txt\n+x\n*** End Patch"}),
    ("shell", {"command": "touch h.txt"}),
]


@pytest.mark.parametrize(("tool", "args"), WRITES, ids=[t for t, _ in WRITES])
async def test_plan_denies_mutating_tools_without_prompting(tmp_path, tool, args):
    (tmp_path / "f.txt").write_text("a")
    gate = RecordingGate(reply="always")
    result = await _registry(tmp_path).settle(
        tool, args, _ctx(tmp_path), agent=PLAN, permissions=gate
    )
    assert isinstance(result, ToolFailure) and result.error.startswith("Permission denied")
    assert gate.requests == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]
    assert (tmp_path / "f.txt").read_text() == "a"


def test_plan_catalog_is_read_only(tmp_path):
    registry = _registry(tmp_path)
    assert [d.name for d in registry.definitions(PLAN)] == ["glob", "grep", "read"]
    assert len(registry.definitions(BUILD)) == 7


async def test_permission_stays_pinned_to_the_issuing_agent(tmp_path):
    agents = load_agents(str(tmp_path), config_permission={"bash": "ask"}).agents
    build, plan = agents["build"], agents["plan"]
    registry = _registry(tmp_path)
    release = trio.Event()
    gate = RecordingGate(reply="once", release=release)
    selected = {"agent": build}
    results = []
    call = {"command": "echo pinned > out.txt"}

    async def drain():
        issuing = selected["agent"]  # sampled when the provider turn started
        results.append(
            await registry.settle("shell", call, _ctx(tmp_path), agent=issuing, permissions=gate)
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await trio.testing.wait_all_tasks_blocked()
        [request] = gate.requests
        assert request.agent == "build" and request.permission == "bash"
        assert request.resources == ["echo pinned > out.txt"] and request.call_id == "call_1"
        assert request.id.startswith("per_")
        selected["agent"] = plan  # the user switches agents while the request is pending
        release.set()
    [result] = results
    assert isinstance(result, ToolSuccess)
    assert (tmp_path / "out.txt").read_text() == "pinned\n"
    under_plan = await registry.settle("shell", call, _ctx(tmp_path, "call_2"), agent=plan)
    assert isinstance(under_plan, ToolFailure) and under_plan.error.startswith("Permission denied")


async def test_always_saves_an_approval_and_reject_fails(tmp_path):
    asking = load_agents(str(tmp_path), config_permission={"read": "ask"}).agents["build"]
    (tmp_path / "a.txt").write_text("hi\n")
    approvals = MemoryApprovals()
    registry = _registry(tmp_path, approvals)
    rejected = await registry.settle(
        "read",
        {"filePath": "a.txt"},
        _ctx(tmp_path),
        agent=asking,
        permissions=RecordingGate("reject"),
    )
    assert rejected == ToolFailure(error="Permission rejected: read on a.txt")
    gate = RecordingGate("always")
    first = await registry.settle(
        "read", {"filePath": "a.txt"}, _ctx(tmp_path), agent=asking, permissions=gate
    )
    second = await registry.settle(
        "read", {"filePath": "a.txt"}, _ctx(tmp_path), agent=asking, permissions=gate
    )
    assert isinstance(first, ToolSuccess) and isinstance(second, ToolSuccess)
    assert len(gate.requests) == 1
    assert approvals.approved == {(str(tmp_path), "read", "a.txt")}
    nobody = await _registry(tmp_path).settle(
        "read", {"filePath": "a.txt"}, _ctx(tmp_path), agent=asking
    )
    assert isinstance(nobody, ToolFailure) and "nobody can be asked" in nobody.error


async def test_configured_deny_beats_saved_approval(tmp_path):
    denying = load_agents(str(tmp_path), config_permission={"bash": "deny"}).agents["build"]
    approvals = MemoryApprovals({(str(tmp_path), "bash", "touch x")})
    gate = RecordingGate("always")
    result = await _registry(tmp_path, approvals).settle(
        "shell", {"command": "touch x"}, _ctx(tmp_path), agent=denying, permissions=gate
    )
    assert isinstance(result, ToolFailure) and result.error.startswith("Permission denied")
    assert gate.requests == [] and not (tmp_path / "x").exists()


async def test_cancel_while_asking_propagates_and_runs_nothing(tmp_path):
    asking = load_agents(str(tmp_path), config_permission={"bash": "ask"}).agents["build"]
    gate = RecordingGate(release=trio.Event())
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def settle() -> None:
                await _registry(tmp_path).settle(
                    "shell", {"command": "touch y"}, _ctx(tmp_path), agent=asking, permissions=gate
                )

            nursery.start_soon(settle)
            await gate.asked.wait()
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught and len(gate.requests) == 1
    assert not (tmp_path / "y").exists()
