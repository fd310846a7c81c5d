import pytest

from runtime.agents import BUILD
from runtime.tools import (
    ToolContext,
    ToolEnvironment,
    ToolError,
    ToolFailure,
    ToolSuccess,
    apply_chunks,
    location_registry,
    parse_patch,
)


def _ctx(tmp_path) -> ToolContext:
    return ToolContext(
        session_id="ses_1",
        agent="build",
        assistant_message_id="msg_1",
        tool_call_id="call_1",
        directory=str(tmp_path),
    )


async def _patch(tmp_path, text: str):
    env = ToolEnvironment(directory=str(tmp_path), data_dir=str(tmp_path / "data"))
    registry = location_registry(env)
    return await registry.settle("apply_patch", {"patchText": text}, _ctx(tmp_path), agent=BUILD)


async def test_add_update_delete_in_one_patch(tmp_path):
    (tmp_path / "keep.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (tmp_path / "gone.txt").write_text("bye\n")
    patch = """*** Begin Patch
*** Add File: pkg/new.py
+print("new")
*** Update File: keep.py
@@ def g():
-    return 2
+    return 3
*** Delete File: gone.txt
*** End Patch"""
    result = await _patch(tmp_path, patch)
    assert isinstance(result, ToolSuccess), result
    assert result.structured == {"applied": ["A pkg/new.py", "M keep.py", "D gone.txt"]}
    assert (tmp_path / "pkg" / "new.py").read_text() == 'print("new")\n'
    assert (
        tmp_path / "keep.py"
    ).read_text() == "def f():\n    return 1\n\n\ndef g():\n    return 3\n"
    assert not (tmp_path / "gone.txt").exists()


async def test_invalid_later_hunk_leaves_earlier_adds_unapplied(tmp_path):
    (tmp_path / "b.txt").write_text("alpha\nbeta\n")
    unmatched = """*** Begin Patch
*** Add File: a.txt
+added
*** Update File: b.txt
-gamma
+delta
*** End Patch"""
    result = await _patch(tmp_path, unmatched)
    assert isinstance(result, ToolFailure) and "Could not find the lines to replace" in result.error
    assert not (tmp_path / "a.txt").exists()
    malformed = unmatched.replace("-gamma", "?gamma")
    result = await _patch(tmp_path, malformed)
    assert isinstance(result, ToolFailure) and result.error.startswith("Invalid patch hunk 2")
    assert not (tmp_path / "a.txt").exists()
    assert (tmp_path / "b.txt").read_text() == "alpha\nbeta\n"


async def test_commit_time_failure_reports_partial_application(tmp_path):
    patch = """*** Begin Patch
*** Add File: p/q.txt
+first
*** Add File: p
+second
*** Add File: r.txt
+third
*** End Patch"""
    result = await _patch(tmp_path, patch)
    assert isinstance(result, ToolFailure)
    assert result.error.startswith("Patch partially applied: p failed")
    assert result.structured["applied"] == ["A p/q.txt"]
    assert result.structured["not_applied"] == ["A r.txt"]
    assert (tmp_path / "p" / "q.txt").read_text() == "first\n"
    assert not (tmp_path / "r.txt").exists()


async def test_moves_existing_adds_and_missing_targets_are_refused(tmp_path):
    (tmp_path / "x.txt").write_text("x\n")
    move = "*** Begin Patch\n*** Update File: x.txt\n*** Move to: y.txt\n-x\n+y\n*** End Patch"
    exists = "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch"
    missing = "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch"
    for text, message in [
        (move, "moves are not supported"),
        (exists, "already exists"),
        (missing, "no such file"),
    ]:
        result = await _patch(tmp_path, text)
        assert isinstance(result, ToolFailure) and message in result.error
    assert (tmp_path / "x.txt").read_text() == "x\n"


def test_parse_requires_envelope():
    with pytest.raises(ToolError, match="first line"):
        parse_patch("*** Add File: a\n+x\n*** End Patch")
    with pytest.raises(ToolError, match="last line"):
        parse_patch("*** Begin Patch\n*** Add File: a\n+x")


def test_update_chunks_tolerate_trailing_whitespace_and_anchor_at_end():
    [op] = parse_patch(
        "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+B\n@@\n+tail\n*** End Patch"
    )
    assert apply_chunks("a  \nb\nc\n", op.chunks, "f") == "a\nB\nc\ntail\n"
