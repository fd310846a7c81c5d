import datetime
import os
from pathlib import Path

import pytest

from runtime.context import (
    DISABLE_PROJECT_CONFIG_ENV,
    UNAVAILABLE,
    InitializationBlocked,
    Initialized,
    InstructionFile,
    ReplacementBlocked,
    Snapshot,
    SystemContext,
    SystemContextRegistry,
    Unavailable,
    Unchanged,
    Updated,
    contribute_core_context,
    date_source,
    discover_instructions,
    environment_source,
    skill_guidance_source,
    to_date_string,
)

SUPERSEDES = "These instructions replace all previously loaded ambient instructions.\n\n"


class Calendar:
    def __init__(self, day: datetime.date) -> None:
        self.day = day

    def today(self) -> datetime.date:
        return self.day


async def initialized(ctx: SystemContext) -> Initialized:
    outcome = await ctx.initialize()
    assert isinstance(outcome, Initialized), outcome
    return outcome


async def updated(ctx: SystemContext, snapshot: Snapshot) -> Updated:
    outcome = await ctx.reconcile(snapshot)
    assert isinstance(outcome, Updated), outcome
    return outcome


@pytest.mark.parametrize(
    ("day", "text"),
    [
        (datetime.date(2026, 11, 26), "Thu Nov 26 2026"),
        (datetime.date(2026, 11, 5), "Thu Nov 05 2026"),
        (datetime.date(2027, 1, 3), "Sun Jan 03 2027"),
        (datetime.date(987, 7, 9), "Mon Jul 09 0987"),
    ],
)
def test_date_string_matches_javascript_to_date_string(day: datetime.date, text: str) -> None:
    assert to_date_string(day) == text


async def test_date_rollover_updates_only_the_date_line() -> None:
    calendar = Calendar(datetime.date(2026, 11, 26))
    ctx = SystemContext.combine(
        environment_source(directory="/w", workspace_root="/w", platform="linux", is_git_repo=True),
        date_source(today=calendar.today),
    )
    first = await initialized(ctx)
    assert first.baseline.endswith("\n\nToday's date: Thu Nov 26 2026")
    assert await ctx.reconcile(first.snapshot) == Unchanged()
    calendar.day = datetime.date(2026, 11, 27)
    outcome = await updated(ctx, first.snapshot)
    assert (outcome.text, outcome.keys) == ("Today's date is now: Fri Nov 27 2026", ["core/date"])
    assert await ctx.reconcile(outcome.snapshot) == Unchanged()


async def test_environment_renders_exact_facts_and_detects_git(tmp_path: Path) -> None:
    work = tmp_path / "repo" / "pkg"
    work.mkdir(parents=True)
    ctx = environment_source(directory=work, workspace_root=tmp_path / "repo", platform="darwin")
    first = await initialized(ctx)
    assert first.baseline == (
        "Here is some useful information about the environment you are running in:\n"
        "<env>\n"
        f"  Working directory: {work}\n"
        f"  Workspace root folder: {tmp_path / 'repo'}\n"
        "  Is directory a git repo: no\n"
        "  Platform: darwin\n"
        "</env>"
    )
    (tmp_path / "repo" / ".git").mkdir()
    outcome = await updated(ctx, first.snapshot)
    assert outcome.text.startswith("The environment you are running in is now:\n<env>\n")
    assert "  Is directory a git repo: yes\n" in outcome.text


async def test_skill_guidance_baseline_update_and_removal() -> None:
    first = await initialized(skill_guidance_source([("review", "Review a diff"), ("a", "First")]))
    block = (
        "<available_skills>\n"
        "  <skill>\n    <name>a</name>\n    <description>First</description>\n  </skill>\n"
        "  <skill>\n    <name>review</name>\n    <description>Review a diff</description>\n"
        "  </skill>\n"
        "</available_skills>"
    )
    preface = (
        "Skills provide specialized instructions and workflows for specific tasks.\n"
        "Use the skill tool to load a skill when a task matches its description.\n"
    )
    assert first.baseline == preface + block
    same = skill_guidance_source([("a", "First"), ("review", "Review a diff")])
    assert await same.reconcile(first.snapshot) == Unchanged()
    narrowed = await updated(skill_guidance_source([]), first.snapshot)
    assert narrowed.text == (
        "The available skills have changed. This list supersedes the previous available "
        "skills list.\n" + preface + "No skills are currently available."
    )
    revoked = await updated(skill_guidance_source(None), first.snapshot)
    assert revoked.text == (
        "Skill guidance is no longer available. Do not use any previously listed skill."
    )
    assert "core/skill-guidance" not in revoked.snapshot


class Project:
    """A project root with nested directories and a config dir, on real files."""

    def __init__(self, tmp_path: Path) -> None:
        self.base = tmp_path.resolve()
        self.root = self.base / "project"
        self.sub = self.root / "sub"
        self.directory = self.sub / "deep"
        self.config = self.base / "config"
        self.directory.mkdir(parents=True)
        self.config.mkdir()

    def write(self, where: Path, text: str) -> Path:
        path = where / "AGENTS.md"
        path.write_text(text, encoding="utf-8")
        return path

    def registry(self, env: dict[str, str] | None = None) -> SystemContextRegistry:
        registry = SystemContextRegistry()
        contribute_core_context(
            registry,
            directory=self.directory,
            project_root=self.root,
            config_dir=self.config,
            env=env or {},
            today=lambda: datetime.date(2026, 11, 26),
            platform="linux",
            is_git_repo=False,
        )
        return registry

    def discover(self, env: dict[str, str] | None = None) -> list[InstructionFile] | Unavailable:
        return discover_instructions(
            directory=self.directory, project_root=self.root, config_dir=self.config, env=env or {}
        )


def block(path: Path, content: str) -> str:
    return f"Instructions from: {path}\n{content}"


async def test_instructions_edit_partial_removal_and_revocation(tmp_path: Path) -> None:
    project = Project(tmp_path)
    home = project.write(project.config, "global rules")
    near = project.write(project.sub, "sub rules")
    far = project.write(project.root, "root rules")
    project.write(project.base, "outside the project root")
    registry = project.registry()
    first = await initialized(await registry.load())
    assert first.baseline == (
        "Here is some useful information about the environment you are running in:\n"
        "<env>\n"
        f"  Working directory: {project.directory}\n"
        f"  Workspace root folder: {project.root}\n"
        "  Is directory a git repo: no\n"
        "  Platform: linux\n"
        "</env>\n\n"
        "Today's date: Thu Nov 26 2026\n\n"
        + "\n\n".join(
            [block(home, "global rules"), block(near, "sub rules"), block(far, "root rules")]
        )
    )
    assert await (await registry.load()).reconcile(first.snapshot) == Unchanged()

    near.write_text("sub rules, edited", encoding="utf-8")
    edited = await updated(await registry.load(), first.snapshot)
    assert edited.text == SUPERSEDES + "\n\n".join(
        [block(home, "global rules"), block(near, "sub rules, edited"), block(far, "root rules")]
    )
    assert edited.keys == ["core/instructions"]

    far.unlink()
    partial = await updated(await registry.load(), edited.snapshot)
    assert partial.text == SUPERSEDES + "\n\n".join(
        [block(home, "global rules"), block(near, "sub rules, edited")]
    )

    home.unlink()
    near.unlink()
    revoked = await updated(await registry.load(), partial.snapshot)
    assert revoked.text == "Previously loaded instructions no longer apply."
    assert sorted(revoked.snapshot) == ["core/date", "core/environment"]
    assert await (await registry.load()).reconcile(revoked.snapshot) == Unchanged()

    again = project.write(project.root, "back again")
    returned = await updated(await registry.load(), revoked.snapshot)
    assert returned.text == block(again, "back again")


async def test_unreadable_instructions_keep_the_admitted_value(tmp_path: Path) -> None:
    project = Project(tmp_path)
    near = project.write(project.sub, "sub rules")
    registry = project.registry()
    first = await initialized(await registry.load())
    near.unlink()
    near.mkdir()  # a directory named AGENTS.md is discovered but can't be read
    assert project.discover() is UNAVAILABLE
    assert await (await registry.load()).reconcile(first.snapshot) == Unchanged()
    blocked = await (await registry.load()).replace(first.snapshot)
    assert blocked == ReplacementBlocked(keys=["core/instructions"])
    near.rmdir()
    near.write_bytes(b"\xff\xfe not utf-8")
    assert await (await registry.load()).reconcile(first.snapshot) == Unchanged()
    near.write_text("sub rules v2", encoding="utf-8")
    outcome = await updated(await registry.load(), first.snapshot)
    assert outcome.text == SUPERSEDES + block(near, "sub rules v2")


async def test_initialize_blocks_while_instructions_are_unreadable(tmp_path: Path) -> None:
    project = Project(tmp_path)
    (project.root / "AGENTS.md").mkdir()
    outcome = await (await project.registry().load()).initialize()
    assert outcome == InitializationBlocked(keys=["core/instructions"])


async def test_disable_flag_skips_project_files_but_keeps_global(tmp_path: Path) -> None:
    project = Project(tmp_path)
    home = project.write(project.config, "global rules")
    project.write(project.sub, "sub rules")
    for value in ("1", "true", "TRUE"):
        files = project.discover({DISABLE_PROJECT_CONFIG_ENV: value})
        assert files == [InstructionFile(path=str(home), content="global rules")]
    enabled = project.discover({DISABLE_PROJECT_CONFIG_ENV: "0"})
    assert isinstance(enabled, list) and [f.content for f in enabled] == [
        "global rules",
        "sub rules",
    ]


async def test_discovery_is_contained_in_the_project_root(tmp_path: Path) -> None:
    project = Project(tmp_path)
    secret = project.write(project.base, "outside")
    os.symlink(secret, project.sub / "AGENTS.md")
    inside = project.write(project.root, "root rules")
    assert project.discover() == [InstructionFile(path=str(inside), content="root rules")]
    outside = discover_instructions(
        directory=project.base, project_root=project.root, config_dir=None, env={}
    )
    assert outside == []


async def test_symlinked_directory_is_canonicalized(tmp_path: Path) -> None:
    project = Project(tmp_path)
    near = project.write(project.sub, "sub rules")
    link = project.base / "link"
    os.symlink(project.directory, link)
    files = discover_instructions(
        directory=link, project_root=project.root, config_dir=None, env={}
    )
    assert files == [InstructionFile(path=str(near), content="sub rules")]


def test_host_calendar_is_read_at_most_once_a_second() -> None:
    from runtime.context._builtins import _HostCalendar

    now = [100.0]
    reads: list[datetime.date] = []
    days = iter([datetime.date(2026, 11, 26), datetime.date(2026, 11, 27)])

    def today() -> datetime.date:
        reads.append(next(days))
        return reads[-1]

    calendar = _HostCalendar(clock=lambda: now[0], today=today)
    assert calendar() == datetime.date(2026, 11, 26)
    now[0] += 0.999
    assert calendar() == datetime.date(2026, 11, 26)
    assert len(reads) == 1
    now[0] += 0.001
    assert calendar() == datetime.date(2026, 11, 27)  # a new day shows within a second
    assert len(reads) == 2
