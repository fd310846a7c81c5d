"""Built-in Context Sources: environment facts, host-local date, selected-agent skill guidance."""

from __future__ import annotations

import datetime
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec
import trio

from runtime.context._system import SystemContext

__all__ = [
    "DATE_KEY",
    "ENVIRONMENT_KEY",
    "EnvironmentFacts",
    "SKILL_GUIDANCE_KEY",
    "SkillSummary",
    "date_source",
    "environment_source",
    "find_git_repository",
    "render_date",
    "render_environment",
    "render_skill_guidance",
    "skill_guidance_source",
    "to_date_string",
]

ENVIRONMENT_KEY: Final = "core/environment"
DATE_KEY: Final = "core/date"
SKILL_GUIDANCE_KEY: Final = "core/skill-guidance"

_WEEKDAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun")
_MONTHS_LATE: Final = ("Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SKILLS_CHANGED: Final = (
    "The available skills have changed. This list supersedes the previous available skills list."
)
_SKILLS_REMOVED: Final = (
    "Skill guidance is no longer available. Do not use any previously listed skill."
)


class EnvironmentFacts(msgspec.Struct, frozen=True, kw_only=True):
    """Facts about where the agent runs."""

    working_directory: str
    workspace_root: str
    is_git_repo: bool
    platform: str


class SkillSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A skill the selected agent may load: name and description only."""

    name: str
    description: str


def render_environment(facts: EnvironmentFacts) -> str:
    """The ``<env>`` block for ``facts``."""
    return (
        "<env>\n"
        f"  Working directory: {facts.working_directory}\n"
        f"  Workspace root folder: {facts.workspace_root}\n"
        f"  Is directory a git repo: {'yes' if facts.is_git_repo else 'no'}\n"
        f"  Platform: {facts.platform}\n"
        "</env>"
    )


def _environment_baseline(facts: EnvironmentFacts) -> str:
    return (
        "Here is some useful information about the environment you are running in:\n"
        + render_environment(facts)
    )


def _environment_update(facts: EnvironmentFacts) -> str:
    return "The environment you are running in is now:\n" + render_environment(facts)


def find_git_repository(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` or one of its ancestors holds ``.git``. Blocking."""
    path = Path(os.path.realpath(directory))
    return any((candidate / ".git").exists() for candidate in (path, *path.parents))


def environment_source(
    *,
    directory: str | os.PathLike[str],
    workspace_root: str | os.PathLike[str],
    platform: str = sys.platform,
    is_git_repo: bool | None = None,
) -> SystemContext:
    """The ``core/environment`` source.

    With ``is_git_repo=None`` each observation checks for ``.git`` in a worker
    thread (not abandoned on cancellation; the check is a few ``stat`` calls);
    otherwise the source is already loaded.
    """
    working_directory, root = os.fspath(directory), os.fspath(workspace_root)

    def facts(git: bool) -> EnvironmentFacts:
        return EnvironmentFacts(
            working_directory=working_directory,
            workspace_root=root,
            is_git_repo=git,
            platform=platform,
        )

    if is_git_repo is not None:
        return SystemContext.loaded(
            ENVIRONMENT_KEY,
            EnvironmentFacts,
            facts(is_git_repo),
            _environment_baseline,
            _environment_update,
        )

    async def load() -> EnvironmentFacts:
        return facts(await trio.to_thread.run_sync(find_git_repository, working_directory))

    return SystemContext.make(
        ENVIRONMENT_KEY, EnvironmentFacts, load, _environment_baseline, _environment_update
    )


def to_date_string(day: datetime.date) -> str:
    """``day`` formatted like JavaScript ``Date.prototype.toDateString``: ``Thu Nov 26 2026``."""
    month = (_MONTHS + _MONTHS_LATE)[day.month - 1]
    return f"{_WEEKDAYS[day.weekday()]} {month} {day.day:02d} {day.year:04d}"


def render_date(day: datetime.date) -> str:
    """Baseline rendering of the ``core/date`` source."""
    return f"Today's date: {to_date_string(day)}"


def _date_update(day: datetime.date) -> str:
    return f"Today's date is now: {to_date_string(day)}"


_TODAY_TTL: Final = 1.0  # seconds a read of the host calendar is reused


class _HostCalendar:
    """The host-local date, read from the clock at most once a ``_TODAY_TTL``.

    ``date.today()`` costs a timezone lookup (about 10 us) and every provider turn
    asks; a new day (or timezone) shows within a second.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        today: Callable[[], datetime.date] = datetime.date.today,
    ) -> None:
        self._clock = clock
        self._today = today
        self._day = datetime.date.min
        self._until = -float("inf")

    def __call__(self) -> datetime.date:
        now = self._clock()
        if now >= self._until:
            self._day, self._until = self._today(), now + _TODAY_TTL
        return self._day


_host_today: Final = _HostCalendar()


def date_source(*, today: Callable[[], datetime.date] = _host_today) -> SystemContext:
    """The ``core/date`` source; ``today`` is the injected host-local calendar clock."""

    async def load() -> datetime.date:
        return today()

    return SystemContext.make(DATE_KEY, datetime.date, load, render_date, _date_update)


def render_skill_guidance(skills: Sequence[SkillSummary]) -> str:
    """The skill guidance text: an ``<available_skills>`` block of names and descriptions."""
    lines = [
        "Skills provide specialized instructions and workflows for specific tasks.",
        "Use the skill tool to load a skill when a task matches its description.",
    ]
    if not skills:
        lines.append("No skills are currently available.")
        return "\n".join(lines)
    lines.append("<available_skills>")
    for skill in skills:
        lines += [
            "  <skill>",
            f"    <name>{skill.name}</name>",
            f"    <description>{skill.description}</description>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    return "\n".join(lines)


def _skills_update(skills: list[SkillSummary]) -> str:
    return f"{_SKILLS_CHANGED}\n{render_skill_guidance(skills)}"


def _skills_removed(skills: list[SkillSummary]) -> str:
    return _SKILLS_REMOVED


def skill_guidance_source(skills: Sequence[tuple[str, str]] | None) -> SystemContext:
    """The ``core/skill-guidance`` source for the selected agent.

    Args:
      skills: ``(name, description)`` pairs already filtered by the agent's
        permissions, or ``None`` when the agent may use no skill at all (the source
        is then absent, and a previously admitted list is revoked).
    """
    if skills is None:
        return SystemContext.EMPTY
    value = sorted(
        (SkillSummary(name=name, description=description) for name, description in skills),
        key=lambda skill: (skill.name, skill.description),
    )
    return SystemContext.loaded(
        SKILL_GUIDANCE_KEY,
        list[SkillSummary],
        value,
        render_skill_guidance,
        _skills_update,
        _skills_removed,
    )
