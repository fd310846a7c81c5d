"""Skills: ``SKILL.md`` files with front matter (``name``, ``description``), listed in the
``skill`` tool's description and loaded into the conversation by a call.

Folders, lowest precedence first (a later skill of the same name wins): Claude's
``~/.claude/skills``, OpenCode's ``~/.config/opencode/skill(s)``, the global config dir's
``skill(s)``, then the Location's ``.claude/skills``, ``.opencode/skill(s)`` and
``.kittiwake/skill(s)``; each holds ``<name>/SKILL.md``. Reading them blocks: callers run
:func:`load_skills` and :func:`read_skill` in a worker thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from html import escape
from typing import Final

import msgspec

from runtime.agents import AgentInfo, evaluate_resource, parse_front_matter
from runtime.llm import TextPart
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._tool import Tool

__all__ = [
    "Skill",
    "SkillInput",
    "SkillLimits",
    "SkillLoad",
    "load_skills",
    "read_skill",
    "skill_folders",
    "skill_tool",
]

_log = logging.getLogger("runtime.tools")
SKILL_FILE: Final = "SKILL.md"


class SkillLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds of skill discovery: skills kept, bytes read of one ``SKILL.md``."""

    max_skills: int = 256
    max_bytes: int = 256 * 1024


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    """One skill: its name, description, ``SKILL.md`` path and body (front matter removed)."""

    name: str
    description: str
    location: str
    content: str


class SkillLoad(msgspec.Struct, frozen=True, kw_only=True):
    """Skills by name, and one diagnostic per ``SKILL.md`` that could not be used."""

    skills: dict[str, Skill] = {}
    diagnostics: list[str] = []


class SkillInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    """The skill's name, as listed in the tool's description."""


def skill_folders(directory: str, env: Mapping[str, str] | None) -> list[str]:
    """The folders holding ``<name>/SKILL.md``, lowest precedence first. Without *env* (no
    configuration), only the Location's own folders."""
    folders: list[str] = []
    if env is not None:
        home = env.get("HOME", "")
        config = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        if home:
            folders.append(os.path.join(home, ".claude", "skills"))
        folders += [os.path.join(config, "opencode", n) for n in ("skill", "skills")]
        folders += [os.path.join(config, "kittiwake", n) for n in ("skill", "skills")]
    folders.append(os.path.join(directory, ".claude", "skills"))
    folders += [os.path.join(directory, ".opencode", n) for n in ("skill", "skills")]
    folders += [os.path.join(directory, ".kittiwake", n) for n in ("skill", "skills")]
    return folders


def read_skill(path: str, limits: SkillLimits) -> Skill:
    """Read one ``SKILL.md`` (blocking). Raises OSError, or ValueError for front matter
    without a description or a file over ``limits.max_bytes``."""
    with open(path, "rb") as handle:
        raw = handle.read(limits.max_bytes + 1)
    if len(raw) > limits.max_bytes:
        raise ValueError(f"larger than {limits.max_bytes} bytes")
    meta, body = parse_front_matter(raw.decode("utf-8", errors="replace"))
    name = str(meta.get("name") or os.path.basename(os.path.dirname(path)))
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("front matter has no description")
    return Skill(name=name, description=description.strip(), location=path, content=body)


def load_skills(
    directory: str, env: Mapping[str, str] | None, limits: SkillLimits | None = None
) -> SkillLoad:
    """Every skill of the Location *directory* (blocking; see :func:`skill_folders`). A
    broken file is skipped with a diagnostic; past ``max_skills`` the rest are left out."""
    bounds = limits or SkillLimits()
    skills: dict[str, Skill] = {}
    diagnostics: list[str] = []
    for folder in skill_folders(directory, env):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name, SKILL_FILE)
            if not os.path.isfile(path):
                continue
            if len(skills) >= bounds.max_skills and name not in skills:
                diagnostics.append(f"{path}: more than {bounds.max_skills} skills; left out")
                continue
            try:
                skill = read_skill(path, bounds)
            except (OSError, ValueError) as exc:
                diagnostics.append(f"{path}: {exc}")
                _log.warning("skill not loaded", extra={"path": path, "error": str(exc)})
                continue
            skills[skill.name] = skill
    return SkillLoad(skills=skills, diagnostics=diagnostics)


SKILL_DESCRIPTION: Final = """\
Load a skill: specialized instructions and resources for a kind of task. When a task \
matches one of the skills below, call this tool with its name before starting; its \
instructions are added to the conversation."""


def _describe(skills: Mapping[str, Skill], agent: AgentInfo) -> str:
    allowed = [
        s for s in skills.values() if evaluate_resource(agent.permission, "skill", s.name) != "deny"
    ]
    if not allowed:
        return f"{SKILL_DESCRIPTION}\n\nNo skills are available."
    listed = "\n".join(
        f"  <skill>\n    <name>{escape(s.name, quote=False)}</name>\n"
        f"    <description>{escape(s.description, quote=False)}</description>\n  </skill>"
        for s in sorted(allowed, key=lambda s: s.name)
    )
    return f"{SKILL_DESCRIPTION}\n\n<available_skills>\n{listed}\n</available_skills>"


def skill_tool(
    catalog: Callable[[], Mapping[str, Skill]],
    *,
    rescan: Callable[[], Awaitable[Mapping[str, Skill]]] | None = None,
    limits: SkillLimits | None = None,
) -> Tool[SkillInput]:
    """The ``skill`` tool over *catalog* (the Location's skills as last read).

    Its description lists the skills the agent's rules do not deny (permission ``skill``,
    the skill's name as resource). A call names one: its ``SKILL.md`` is read again in a
    worker thread and returned in ``<skill_content>``; an unknown name is looked up once
    more with *rescan* (a skill added since), then fails.
    """
    bounds = limits or SkillLimits()

    async def load(args: SkillInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        skills = catalog()
        if args.name not in skills and rescan is not None:
            skills = await rescan()
        found = skills.get(args.name)
        if found is None:
            known = ", ".join(sorted(skills)) or "none"
            raise ToolError(f"Unknown skill {args.name!r}; available: {known}")
        try:
            skill = await run_blocking(env, lambda: read_skill(found.location, bounds))
        except (OSError, ValueError) as exc:
            raise ToolError(f"Skill {args.name} could not be read: {exc}") from None
        base = os.path.dirname(skill.location)
        text = (
            f'<skill_content name="{escape(skill.name, quote=False)}">\n# Skill: {skill.name}\n\n'
            f"{skill.content.strip()}\n\nBase directory for this skill: file://{base}\n"
            "Relative paths in this skill (e.g., scripts/, reference/) are relative to this "
            "base directory.\n</skill_content>"
        )
        structured = {"name": skill.name, "location": skill.location}
        return ToolOutput(content=[TextPart(text=text)], structured=structured)

    return Tool(
        name="skill", description=SKILL_DESCRIPTION, input_type=SkillInput, handler=load,
        permission="skill", resources=lambda args, env: [args.name],
        describe=lambda agent: _describe(catalog(), agent),
    )  # fmt: skip
