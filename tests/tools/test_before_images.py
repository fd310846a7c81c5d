"""File tools hand the registry's ``before_change`` the files' previous content first."""

from __future__ import annotations

import pytest

from runtime.agents import BUILD
from runtime.events import FileImage
from runtime.tools import ToolContext, ToolEnvironment, ToolFailure, ToolSuccess, location_registry


def _ctx(root) -> ToolContext:
    return ToolContext(
        session_id="ses_1", agent="build", assistant_message_id="msg_1", tool_call_id="call_1",
        directory=str(root),
    )  # fmt: skip


async def _settle(tmp_path, name, args, *, limit=1024, fail=False):
    root = tmp_path / "loc"
    root.mkdir(exist_ok=True)
    env = ToolEnvironment(
        directory=str(root), data_dir=str(tmp_path / "data"), before_image_max_bytes=limit
    )
    seen: list[list[FileImage]] = []

    async def before_change(files: list[FileImage]) -> None:
        seen.append(files)
        if fail:
            raise OSError("disk full")

    result = await location_registry(env).settle(
        name, args, _ctx(root), agent=BUILD, before_change=before_change
    )
    return result, seen, root


async def test_write_records_the_previous_content_or_absence(tmp_path) -> None:
    (tmp_path / "loc").mkdir()
    (tmp_path / "loc" / "a.txt").write_text("old")
    result, seen, root = await _settle(tmp_path, "write", {"filePath": "a.txt", "content": "new"})
    assert isinstance(result, ToolSuccess)
    assert seen == [[FileImage(path=str(root / "a.txt"), content=b"old")]]
    result, seen, root = await _settle(tmp_path, "write", {"filePath": "d/b.txt", "content": "x"})
    assert seen == [[FileImage(path=str(root / "d" / "b.txt"), content=None)]]


async def test_apply_patch_records_every_target(tmp_path) -> None:
    (tmp_path / "loc").mkdir()
    (tmp_path / "loc" / "u.txt").write_text("one\n")
    (tmp_path / "loc" / "gone.txt").write_text("bye\n")
    patch = (
        "*** Begin Patch\n*** Add File: n.txt\n+hi\n*** Update File: u.txt\n-one\n+two\n"
        "*** Delete File: gone.txt\n*** End Patch"
    )
    result, seen, root = await _settle(tmp_path, "apply_patch", {"patchText": patch})
    assert isinstance(result, ToolSuccess), result
    assert {(f.path, f.content) for f in seen[0]} == {
        (str(root / "n.txt"), None), (str(root / "u.txt"), b"one\n"),
        (str(root / "gone.txt"), b"bye\n"),
    }  # fmt: skip


async def test_an_unrecorded_image_fails_the_call_and_changes_nothing(tmp_path) -> None:
    (tmp_path / "loc").mkdir()
    (tmp_path / "loc" / "a.txt").write_text("old")
    edit = {"filePath": "a.txt", "oldString": "old", "newString": "new"}
    result, _, root = await _settle(tmp_path, "edit", edit, fail=True)
    assert isinstance(result, ToolFailure)
    assert "previous content" in result.error and "disk full" in result.error
    assert (root / "a.txt").read_text() == "old"


@pytest.mark.parametrize("size", [10, 11])
async def test_a_file_over_the_limit_is_recorded_as_omitted(tmp_path, size) -> None:
    (tmp_path / "loc").mkdir()
    (tmp_path / "loc" / "big.txt").write_text("x" * size)
    result, seen, root = await _settle(
        tmp_path, "write", {"filePath": "big.txt", "content": "y"}, limit=10
    )
    assert isinstance(result, ToolSuccess)
    omitted = size > 10
    assert seen[0][0].omitted is omitted
    assert seen[0][0].content == (None if omitted else b"x" * size)
