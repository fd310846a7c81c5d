"""Built-in command prompts: the text a command admits as the user's prompt."""

from __future__ import annotations

from typing import Final

__all__ = ["INIT_PROMPT"]

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
