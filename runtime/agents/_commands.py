"""Commands: prompt templates run by name, from ``.kittiwake/command/*.md`` files (front matter
``description``, ``agent``, ``model``; the body is the template) and the built-in ``init``.

A template takes ``$ARGUMENTS`` and ``$1``, ``$2``...; ``!`command` `` spans are replaced by the
command's output and ``@path`` mentions bring the file in (both done by the runtime, which
runs and reads them; the text work is here).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Final, Literal

import msgspec

from runtime.agents._frontmatter import parse_front_matter

__all__ = [
    "INIT",
    "INIT_PROMPT",
    "CommandInfo",
    "CommandLoad",
    "command_folders",
    "command_hints",
    "expand_arguments",
    "file_mentions",
    "load_commands",
    "replace_shell",
    "shell_spans",
]

INIT_PROMPT: Final = """\
Look through this project and write an AGENTS.md file at its root for coding agents that \
will work here. If one exists, improve it rather than starting over.

Cover, in about twenty lines:
- how to install, build, lint and run the tests, including how to run a single test;
- the code style the project follows: imports, formatting, typing, naming and error \
handling;
- any project rules already written for other assistants (for example .cursorrules, \
.cursor/rules/ or .github/copilot-instructions.md), folded in.

Only state what the files show; do not guess at commands that are not there."""


class CommandInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One command: a prompt template run by name (``/name arguments``).

    An MCP server's prompt (``source`` ``mcp``) has its template fetched when it runs;
    ``hints`` then names its arguments (``$1``...), which the empty template cannot."""

    name: str
    template: str
    description: str | None = None
    agent: str | None = None
    model: str | None = None
    source: Literal["builtin", "command", "mcp"] = "command"
    hints: list[str] | None = None


class CommandLoad(msgspec.Struct, frozen=True, kw_only=True):
    """Commands by name, and one diagnostic per file that could not be used."""

    commands: dict[str, CommandInfo] = {}
    diagnostics: list[str] = []


INIT: Final = CommandInfo(
    name="init",
    template=INIT_PROMPT,
    description="create or update the project's AGENTS.md",
    source="builtin",
)
_PLACEHOLDER: Final = re.compile(r"\$(ARGUMENTS|\d+)")
_SHELL: Final = re.compile(r"!`([^`]+)`")
_MENTION: Final = re.compile(r"(?<![\w`])@(\.?[^\s`,;:!?()\[\]{}<>\"']+)")
_KNOWN: Final = frozenset({"description", "agent", "model", "subtask"})


def command_folders(directory: str, global_dir: str | None) -> list[str]:
    """Folders of ``<name>.md`` command files, lowest precedence first."""
    folders = [os.path.join(global_dir, "command")] if global_dir is not None else []
    folders += [os.path.join(directory, ".opencode", "command")]
    return [*folders, os.path.join(directory, ".kittiwake", "command")]


def load_commands(directory: str, global_dir: str | None, *, max_bytes: int) -> CommandLoad:
    """The built-in ``init`` and every ``<name>.md`` of :func:`command_folders` (blocking);
    a later file of the same name wins; a broken or oversized file is a diagnostic."""
    commands = {"init": INIT}
    diagnostics: list[str] = []
    for folder in command_folders(directory, global_dir):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".md"))
        except OSError:
            continue
        for file_name in names:
            path = os.path.join(folder, file_name)
            try:
                with open(path, "rb") as handle:
                    raw = handle.read(max_bytes + 1)
                if len(raw) > max_bytes:
                    raise ValueError(f"larger than {max_bytes} bytes")
                meta, body = parse_front_matter(raw.decode("utf-8", errors="replace"))
                name = file_name.removesuffix(".md")
                commands[name] = CommandInfo(
                    name=name, template=body.strip(), description=_text(meta, "description"),
                    agent=_text(meta, "agent"), model=_text(meta, "model"),
                )  # fmt: skip
            except (OSError, ValueError) as exc:
                diagnostics.append(f"{path}: {exc}")
    return CommandLoad(commands=commands, diagnostics=diagnostics)


def _text(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return str(value) if value is not None else None


def command_hints(template: str) -> list[str]:
    """The placeholders *template* takes: ``$1``, ``$2``, ... in order, then ``$ARGUMENTS``."""
    found = set(_PLACEHOLDER.findall(template))
    numbers = sorted(int(f) for f in found if f.isdigit())
    return [f"${n}" for n in numbers] + (["$ARGUMENTS"] if "ARGUMENTS" in found else [])


def expand_arguments(template: str, arguments: str) -> str:
    """Put *arguments* into *template*: ``$ARGUMENTS`` is all of them, ``$1``... one word
    each (quotes group words), the highest placeholder taking the rest; unused ones empty.
    A template without placeholders gets the arguments appended."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    numbers = [int(n) for n in _PLACEHOLDER.findall(template) if n.isdigit()]
    last = max(numbers, default=0)

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return arguments
        index = int(key)
        if index == last and len(words) > last:
            return " ".join(words[index - 1 :])
        return words[index - 1] if 0 < index <= len(words) else ""

    if not _PLACEHOLDER.search(template):
        return f"{template}\n\n{arguments}".strip() if arguments.strip() else template
    return _PLACEHOLDER.sub(substitute, template)


def shell_spans(text: str) -> list[str]:
    """The commands of the ``!`command` `` spans in *text*, in order."""
    return _SHELL.findall(text)


def replace_shell(text: str, outputs: list[str]) -> str:
    """*text* with each ``!`command` `` span replaced by its output, in order."""
    pending = iter(outputs)
    return _SHELL.sub(lambda _: next(pending, ""), text)


def file_mentions(text: str) -> list[str]:
    """The ``@path`` mentions of *text*, in order, once each."""
    return list(dict.fromkeys(_MENTION.findall(text)))
