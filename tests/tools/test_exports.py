import runtime.agents
import runtime.tools
import runtime.tools.lsp
import runtime.tools.testing
import runtime.tools.web


def _public(module) -> list[str]:
    return sorted(n for n in vars(module) if not n.startswith("_") and n != "annotations")


def test_exports_are_pinned_and_sorted():
    for module in (runtime.tools, runtime.agents, runtime.tools.testing):
        assert module.__all__ == sorted(module.__all__)
        exported = set(module.__all__)
        assert exported <= set(_public(module))


def test_tool_rooms_export_exactly_their_public_names_and_tools_re_exports_them():
    for room in (runtime.tools.lsp, runtime.tools.web):
        assert room.__all__ == sorted(room.__all__) == _public(room)
        for name in room.__all__:
            assert getattr(runtime.tools, name) is getattr(room, name), name


def test_drain_loop_seam_names():
    for name in ("ToolContext", "ToolSuccess", "ToolFailure", "ToolSettlement", "Tool"):
        assert name in runtime.tools.__all__
    assert {"ToolRegistry", "ToolContribution", "ToolOutputLimits"} <= set(runtime.tools.__all__)
    assert {
        "AgentInfo",
        "PermissionGate",
        "PermissionRequest",
        "SavedApprovals",
        "evaluate",
    } <= set(runtime.agents.__all__)
