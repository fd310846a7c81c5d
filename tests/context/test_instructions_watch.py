"""InstructionsWatch: an unchanged tree costs no worker thread; every change is seen."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from runtime.context import RACY_NS, InstructionFile, InstructionsWatch

SETTLE = RACY_NS / 1e9 + 0.05


def _watch(root: Path, work: Path, config: Path) -> InstructionsWatch:
    return InstructionsWatch(directory=work, project_root=root, config_dir=config, env={})


def _texts(files: object) -> list[str]:
    assert isinstance(files, list)
    return [f.content for f in files if isinstance(f, InstructionFile)]


async def test_unchanged_files_are_reused_and_every_change_is_seen(tmp_path: Path) -> None:
    root, config = tmp_path / "repo", tmp_path / "config"
    work = root / "pkg" / "mod"
    work.mkdir(parents=True)
    config.mkdir()
    (root / "AGENTS.md").write_text("root one")
    (config / "AGENTS.md").write_text("global")
    await trio.sleep(SETTLE)
    watch = _watch(root, work, config)

    assert _texts(await watch.load()) == ["global", "root one"]
    for _ in range(5):
        assert _texts(await watch.load()) == ["global", "root one"]
    assert watch.discoveries == 1

    (root / "AGENTS.md").write_text("root two")  # same size, right after a trusted look
    assert _texts(await watch.load()) == ["global", "root two"]

    (work / "AGENTS.md").write_text("nearest")  # a file appears at a level that had none
    assert _texts(await watch.load()) == ["global", "nearest", "root two"]

    os.unlink(config / "AGENTS.md")
    assert _texts(await watch.load()) == ["nearest", "root two"]

    target = root / "shared.md"
    target.write_text("linked a")
    os.unlink(work / "AGENTS.md")
    (work / "AGENTS.md").symlink_to(target)
    await trio.sleep(SETTLE)
    assert _texts(await watch.load()) == ["linked a", "root two"]
    target.write_text("linked b")  # the link is unchanged; its target is not
    assert _texts(await watch.load()) == ["linked b", "root two"]


async def test_files_changed_just_before_a_look_are_read_again(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("fresh")
    watch = _watch(tmp_path, tmp_path, tmp_path / "none")
    await watch.load()
    await watch.load()
    assert watch.discoveries == 2  # too recent to trust its stamps
    await trio.sleep(SETTLE)
    await watch.load()
    await watch.load()
    assert watch.discoveries == 3
