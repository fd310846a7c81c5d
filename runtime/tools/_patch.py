"""The ``apply_patch`` tool: add, update and delete hunks, all checked before any write.

Every hunk is parsed, every target resolved inside authority and authorized as
one edit batch, and every operation preflighted (adds must not exist, updates
must apply, deletes must name files) before the first write. Operations then
commit in patch order; a commit-time failure stops there and reports which
operations were applied, which failed and which were not attempted. There is
no rollback, and moves are refused.
"""

from __future__ import annotations

import os
from typing import Final

import msgspec

from runtime.llm import TextPart
from runtime.tools._authority import ResolvedPath, resolve_path
from runtime.tools._io import run_blocking
from runtime.tools._model import ToolContext, ToolEnvironment, ToolError, ToolOutput
from runtime.tools._patch_parse import PatchOp, apply_chunks, parse_patch
from runtime.tools._tool import Tool
from runtime.tools._write import write_text

__all__ = ["ApplyPatchInput", "apply_patch_tool"]

_LETTER: Final = {"add": "A", "update": "M", "delete": "D"}


class ApplyPatchInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Input of ``apply_patch``: the whole patch text, ``patchText``."""

    patch_text: str


class _Planned(msgspec.Struct, frozen=True, kw_only=True):
    op: PatchOp
    target: ResolvedPath
    content: str = ""


DESCRIPTION: Final = """Apply a patch of file operations, paths relative to the project directory:
*** Begin Patch
*** Add File: path/new.txt
+first line
*** Update File: path/old.txt
@@ optional line to anchor on
 context line
-removed line
+added line
*** Delete File: path/gone.txt
*** End Patch
Every hunk is checked before anything is written. Moves are not supported."""


def apply_patch_tool() -> Tool[ApplyPatchInput]:
    """The ``apply_patch`` tool (permission ``edit``, resources: every target path)."""

    async def handler(data: ApplyPatchInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        targets = _targets(parse_patch(data.patch_text), env)
        return await run_blocking(env, lambda: _commit(_preflight(targets)))

    return Tool(
        name="apply_patch",
        description=DESCRIPTION,
        input_type=ApplyPatchInput,
        handler=handler,
        permission="edit",
        resources=lambda data, env: [
            t.resource for _, t in _targets(parse_patch(data.patch_text), env)
        ],
        touched=lambda structured: [
            a.split(" ", 1)[1] for a in structured["applied"] if not a.startswith("D ")
        ],
        changes=lambda data, env: [
            t.absolute for _, t in _targets(parse_patch(data.patch_text), env)
        ],
    )


def _targets(ops: list[PatchOp], env: ToolEnvironment) -> list[tuple[PatchOp, ResolvedPath]]:
    resolved = [(op, resolve_path(env, op.path)) for op in ops]
    seen = [t.absolute for _, t in resolved]
    duplicated = {p for p in seen if seen.count(p) > 1}
    if duplicated:
        raise ToolError(
            f"Invalid patch: a file appears in more than one hunk: {sorted(duplicated)}"
        )
    return resolved


def _preflight(targets: list[tuple[PatchOp, ResolvedPath]]) -> list[_Planned]:
    return [_check(op, target) for op, target in targets]


def _check(op: PatchOp, target: ResolvedPath) -> _Planned:
    if op.kind == "add":
        if os.path.lexists(target.absolute):
            raise ToolError(f"Cannot add {op.path}: it already exists")
        return _Planned(op=op, target=target, content=op.content)
    if not os.path.isfile(target.absolute):
        raise ToolError(f"Cannot {op.kind} {op.path}: no such file")
    if op.kind == "delete":
        return _Planned(op=op, target=target)
    with open(target.absolute, encoding="utf-8") as handle:
        current = handle.read()
    return _Planned(op=op, target=target, content=apply_chunks(current, op.chunks, op.path))


def _commit(plan: list[_Planned]) -> ToolOutput:
    applied: list[str] = []
    for index, step in enumerate(plan):
        try:
            _perform(step)
        except (OSError, ToolError) as exc:
            raise _partial(plan, applied, index, exc) from None
        applied.append(f"{_LETTER[step.op.kind]} {step.target.resource}")
    text = "Success. Updated the following files:\n" + "\n".join(applied)
    return ToolOutput(content=[TextPart(text=text)], structured={"applied": applied})


def _perform(step: _Planned) -> None:
    if step.op.kind == "delete":
        os.unlink(step.target.absolute)
    else:
        write_text(step.target, step.content)


def _partial(plan: list[_Planned], applied: list[str], index: int, exc: Exception) -> ToolError:
    failed = plan[index].target.resource
    skipped = [f"{_LETTER[s.op.kind]} {s.target.resource}" for s in plan[index + 1 :]]
    lines = [
        f"Patch partially applied: {failed} failed: {getattr(exc, 'strerror', None) or exc}",
        "Applied:",
        *(f"  {a}" for a in applied or ["(none)"]),
        "Not applied:",
        *(f"  {s}" for s in skipped or ["(none)"]),
    ]
    report = {"applied": applied, "failed": failed, "error": str(exc), "not_applied": skipped}
    return ToolError("\n".join(lines), structured=report)
