"""The Location-scoped Tool Registry: scoped contributions and tool-call settlement."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from types import TracebackType
from typing import Any, Final, Protocol, TypeAlias, final

import msgspec
import trio

from runtime.agents import AgentInfo, PermissionGate, SavedApprovals, is_wholly_denied
from runtime.events import FileImage
from runtime.llm import TextPart, ToolDefinition
from runtime.tools._authorize import authorize
from runtime.tools._bounding import (
    apply_bounding,
    bounding_text,
    exceeds_limits,
    preview,
)
from runtime.tools._hooks import ToolHooks
from runtime.tools._io import run_blocking
from runtime.tools._managed import write_managed_output
from runtime.tools._model import (
    ToolContext,
    ToolEnvironment,
    ToolError,
    ToolFailure,
    ToolIO,
    ToolOutput,
    ToolSettlement,
    ToolSuccess,
)
from runtime.tools._shell import shell_environment
from runtime.tools._tool import Tool

__all__ = [
    "BeforeChange",
    "EditObserver",
    "EditReport",
    "ToolContribution",
    "ToolRegistry",
    "ToolRegistryStatistics",
]

_log = logging.getLogger("runtime.tools")
_ADVERTISED_AGENTS: Final = 32  # agent objects whose tool definitions are kept


class EditReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an edit observer found in the files an edit touched: ``note``, text appended to
    the result (``None``: nothing to say), and ``diagnostics``, the errors of each file that
    has some (LSP ``Diagnostic`` objects as JSON) by its path relative to the Location."""

    note: str | None = None
    diagnostics: dict[str, list[dict[str, Any]]] = {}


class EditObserver(Protocol):
    """Told the files a successful edit touched; answers what it found in them (language
    server diagnostics)."""

    async def after_edit(self, paths: list[str]) -> EditReport: ...


BeforeChange: TypeAlias = Callable[[list[FileImage]], Awaitable[None]]
"""Makes the previous content of the files a call is about to change durable (raises
when it could not)."""


class ToolRegistryStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one registry."""

    tools: int
    contributions: int
    in_flight: int
    settled: int
    failed: int
    lossy: int


@final
class ToolContribution:
    """A scoped set of tool definitions; closing it removes them and makes their
    in-flight calls settle as "Stale tool call". With a ``session_id``, only that
    session's provider turns are offered them and only its calls find them."""

    def __init__(
        self, registry: ToolRegistry, tools: dict[str, Tool[Any]], session_id: str | None = None
    ) -> None:
        self._registry = registry
        self.tools = tools
        self.session_id = session_id
        self.closed = False
        self._in_flight: set[trio.CancelScope] = set()

    def close(self) -> None:
        """Remove the definitions and cancel their in-flight handlers. Idempotent."""
        if not self.closed:
            self.closed = True
            self._registry._remove(self)
            for scope in self._in_flight:
                scope.cancel()

    @contextmanager
    def _track(self) -> Iterator[trio.CancelScope]:
        with trio.CancelScope() as scope:
            self._in_flight.add(scope)
            try:
                yield scope
            finally:
                self._in_flight.discard(scope)

    def __enter__(self) -> ToolContribution:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@final
class ToolRegistry:
    """Tools of one Location (no global state; each open Location's state owns one).

    Args:
        env: the Location's directory, data dir, output limits, clock and ids.
        saved_approvals: per-project "always" approvals, consulted for ``ask``.
    """

    def __init__(
        self, env: ToolEnvironment, *, saved_approvals: SavedApprovals | None = None
    ) -> None:
        self.env = env
        self.saved_approvals = saved_approvals
        self.edit_observer: EditObserver | None = None
        """Consulted after each successful call of a tool with ``touched`` paths."""
        self.hooks: ToolHooks | None = None
        """Consulted by every call (the Location's plugins): see :class:`ToolHooks`."""
        self._contributions: list[ToolContribution] = []
        self._sessions: dict[str, list[ToolContribution]] = {}
        """Contributions of one session's own, by session."""
        self._counts = {"in_flight": 0, "settled": 0, "failed": 0, "lossy": 0}
        self._io: dict[str, ToolIO] = {}
        # definitions() per agent object, until the contributions change
        self._advertised: dict[int, tuple[AgentInfo, list[ToolDefinition]]] = {}

    def contribute(
        self, tools: Tool[Any] | Iterable[Tool[Any]], *, session_id: str | None = None
    ) -> ToolContribution:
        """Add definitions; a later contribution shadows an earlier one of the same name
        until it is closed. With *session_id*, they are that session's alone (offered to
        its turns, found by its calls, shadowing the Location's of the same name).
        Raises ``ValueError`` for duplicate names within *tools*."""
        listed = [tools] if isinstance(tools, Tool) else list(tools)
        by_name = {t.name: t for t in listed}
        if len(by_name) != len(listed):
            raise ValueError("Duplicate tool names in one contribution")
        contribution = ToolContribution(self, by_name, session_id)
        if session_id is not None:
            self._sessions.setdefault(session_id, []).append(contribution)
            return contribution
        self._contributions.append(contribution)
        self._advertised.clear()
        return contribution

    def _remove(self, contribution: ToolContribution) -> None:
        if contribution.session_id is None:
            self._contributions.remove(contribution)
            self._advertised.clear()
            return
        own = self._sessions[contribution.session_id]
        own.remove(contribution)
        if not own:
            del self._sessions[contribution.session_id]

    def lookup(self, name: str, session_id: str | None = None) -> Tool[Any] | None:
        """The current definition called *name* (for *session_id*: its own first), if any."""
        found = self._find(name, session_id)
        return found[0] if found else None

    def _find(
        self, name: str, session_id: str | None = None
    ) -> tuple[Tool[Any], ToolContribution] | None:
        own = self._sessions.get(session_id, []) if session_id is not None else []
        for contribution in (*reversed(own), *reversed(self._contributions)):
            if name in contribution.tools:
                return contribution.tools[name], contribution
        return None

    def names(self) -> list[str]:
        """Every current tool name, sorted."""
        return sorted({n for c in self._contributions for n in c.tools})

    def definitions(self, agent: AgentInfo, session_id: str | None = None) -> list[ToolDefinition]:
        """The catalog advertised to *agent* for one request, sorted by name (for
        *session_id*: with that session's own tools, which shadow the Location's).

        Tools the agent switches off, and tools whose permission its rules deny
        for every resource, are left out. The Location's are kept per agent object (at
        most ``_ADVERTISED_AGENTS``) until a contribution is added or closed.
        """
        shared = self._shared_definitions(agent)
        own = self._sessions.get(session_id, []) if session_id is not None else []
        if not own:
            return shared
        tools: dict[str, Tool[Any]] = {}
        for contribution in own:
            tools.update(contribution.tools)
        mine = [t.definition(agent) for t in tools.values() if _visible(t, agent)]
        merged = {d.name: d for d in shared} | {d.name: d for d in mine}
        return [merged[name] for name in sorted(merged)]

    def _shared_definitions(self, agent: AgentInfo) -> list[ToolDefinition]:
        cached = self._advertised.get(id(agent))
        if cached is not None and cached[0] is agent:
            return list(cached[1])
        definitions = [
            tool.definition(agent)
            for tool in (self.lookup(n) for n in self.names())
            if tool is not None and _visible(tool, agent)
        ]
        if len(self._advertised) >= _ADVERTISED_AGENTS:
            self._advertised.clear()
        self._advertised[id(agent)] = (agent, definitions)
        return list(definitions)

    @contextmanager
    def route_io(self, session_id: str, io: ToolIO) -> Iterator[None]:
        """While in this block, the handlers of *session_id*'s calls get *io* as their
        context's ``io`` (the file tools read and write, the shell tool runs commands,
        through it). A call already running keeps what it started with; on leaving, the
        routing the block replaced (if any) is back."""
        previous = self._io.get(session_id)
        self._io[session_id] = io
        try:
            yield
        finally:
            if previous is None:
                self._io.pop(session_id, None)
            else:
                self._io[session_id] = previous

    def forget_definitions(self) -> None:
        """Drop the kept catalogs, so the next ``definitions`` describes the tools afresh
        (a tool whose description changed, such as the skill catalog)."""
        self._advertised.clear()

    def statistics(self) -> ToolRegistryStatistics:
        """Counters for the inspector."""
        return ToolRegistryStatistics(
            tools=len(self.names()), contributions=len(self._contributions), **self._counts
        )

    async def settle(
        self,
        name: str,
        input: Any,
        ctx: ToolContext,
        *,
        agent: AgentInfo,
        permissions: PermissionGate | None = None,
        before_change: BeforeChange | None = None,
    ) -> ToolSettlement:
        """Run one local tool call to its bounded settlement.

        Decodes and validates *input*, authorizes it under *agent* (the
        effective agent of the provider turn that issued the call, never a
        later selection), runs the handler, validates and bounds its output.

        Every failure becomes a ``ToolFailure``: "Unknown tool: <name>",
        "Invalid tool input ..." (nothing runs), permission denials, handler
        errors, and "Stale tool call: <name>" when the tool's contribution is
        closed while the call is in flight.

        Cancellation: ``trio.Cancelled`` propagates from authorization and the
        handler. Once the handler has succeeded, bounding and the managed file
        write run shielded (bounded by ``env.settle_timeout``; past it the
        output is lossy), and the bounded settlement is returned without a
        further checkpoint, so a cancelled caller still receives it and must
        publish it under its own shield. Raw oversized success never escapes.

        With *before_change*, a tool that changes files (``Tool.changes``) has the previous
        content of each (``FileImage``: ``None`` when it did not exist, omitted above
        ``env.before_image_max_bytes``) handed to it after authorization and before the
        handler; when it raises, the call fails and changes nothing.
        """
        self._counts["in_flight"] += 1
        try:
            result = await self._settle(name, input, ctx, agent, permissions, before_change)
        finally:
            self._counts["in_flight"] -= 1
        result = _bound_failure(result, self.env)
        self._count(result)
        return result

    def _count(self, result: ToolSettlement) -> None:
        self._counts["settled"] += 1
        if isinstance(result, ToolFailure):
            self._counts["failed"] += 1
        elif result.lossy:
            self._counts["lossy"] += 1

    async def _settle(
        self,
        name: str,
        input: Any,
        ctx: ToolContext,
        agent: AgentInfo,
        gate: PermissionGate | None,
        before_change: BeforeChange | None = None,
    ) -> ToolSettlement:
        found = self._find(name, ctx.session_id)
        if found is None:
            await trio.lowlevel.checkpoint()
            return ToolFailure(error=f"Unknown tool: {name}")
        tool, contribution = found
        if not agent.tool_enabled(name):
            await trio.lowlevel.checkpoint()
            return ToolFailure(error=f"Tool {name} is not enabled for agent {agent.name}")
        with contribution._track():
            if self.hooks is not None:
                input = await self.hooks.before(name, input, ctx)
                if isinstance(input, ToolFailure):
                    return input
            outcome = await self._execute(tool, input, ctx, agent, gate, before_change)
            if isinstance(outcome, ToolOutput) and tool.touched is not None:
                outcome = await self._observe_edit(tool, outcome)
        if contribution.closed:
            await trio.lowlevel.checkpoint_if_cancelled()
            return ToolFailure(error=f"Stale tool call: {name}")
        if isinstance(outcome, ToolFailure):
            return outcome
        return await self._bound(tool, outcome, ctx)

    async def _observe_edit(self, tool: Tool[Any], output: ToolOutput) -> ToolOutput:
        """Append what the edit observer says about the touched files to the result: its
        note as text, its diagnostics in the structured result (``diagnostics``, when there
        are any). Its failure only costs that (cancellation propagates: the call is then
        interrupted)."""
        if self.edit_observer is None or tool.touched is None:
            return output
        try:
            report = await self.edit_observer.after_edit(tool.touched(output.structured))
        except Exception as exc:
            _log.warning("edit observer failed", extra={"tool": tool.name, "error": repr(exc)})
            return output
        content = list(output.content)
        if report.note:
            content.append(TextPart(text=report.note))
        structured = output.structured
        if report.diagnostics and isinstance(structured, dict):
            structured = {**structured, "diagnostics": report.diagnostics}
        return msgspec.structs.replace(output, content=content, structured=structured)

    async def _execute(
        self,
        tool: Tool[Any],
        input: Any,
        ctx: ToolContext,
        agent: AgentInfo,
        gate: PermissionGate | None,
        before_change: BeforeChange | None = None,
    ) -> ToolOutput | ToolFailure:
        try:
            decoded = msgspec.convert(input, tool.input_type)
        except msgspec.ValidationError as exc:
            await trio.lowlevel.checkpoint()
            return ToolFailure(error=f"Invalid tool input for {tool.name}: {exc}")
        denied = await authorize(self, tool, decoded, ctx, agent, gate)
        if denied is not None:
            return denied
        if before_change is not None and tool.changes is not None:
            unrecorded = await self._record_before(tool, decoded, before_change)
            if unrecorded is not None:
                return unrecorded
        io = self._io.get(ctx.session_id)
        if io is not None and ctx.io is None:
            ctx = msgspec.structs.replace(ctx, io=io)
        if self.hooks is None:
            return await _run_handler(tool, decoded, ctx, self.env)
        with shell_environment(partial(self.hooks.shell_env, ctx)):
            outcome = await _run_handler(tool, decoded, ctx, self.env)
        return await self.hooks.after(tool.name, input, ctx, outcome)

    async def _record_before(
        self, tool: Tool[Any], decoded: Any, before_change: BeforeChange
    ) -> ToolFailure | None:
        """Hand *before_change* the files' previous content; a failure to read or record
        it fails the call (cancellation propagates)."""
        assert tool.changes is not None
        limit = self.env.before_image_max_bytes
        try:
            paths = tool.changes(decoded, self.env)
            images = await run_blocking(self.env, lambda: [before_image(p, limit) for p in paths])
            await before_change([i for i in images if i is not None])
        except ToolError as exc:
            return ToolFailure(error=str(exc))
        except Exception as exc:
            _log.warning("before-image not recorded", extra={"tool": tool.name, "error": repr(exc)})
            return ToolFailure(error=f"Could not record the files' previous content: {exc}")
        return None

    async def _bound(self, tool: Tool[Any], output: ToolOutput, ctx: ToolContext) -> ToolSuccess:
        text = bounding_text(output)
        if text is None or not exceeds_limits(text, self.env.limits):
            return _success(output)
        path: str | None = None
        with trio.move_on_after(self.env.settle_timeout, shield=True):
            path = await self._retain(text, tool, ctx)
        if path is None:
            _log.warning(
                "tool output bounded without a managed file",
                extra={"tool": tool.name, "tool_call_id": ctx.tool_call_id, "lossy": True},
            )
        return apply_bounding(output, text, path, self.env.limits)

    async def _retain(self, text: str, tool: Tool[Any], ctx: ToolContext) -> str | None:
        file_id = self.env.ids.new("tool")
        directory = self.env.tool_output_dir
        try:
            return await run_blocking(
                self.env, lambda: write_managed_output(directory, file_id, text)
            )
        except OSError as exc:
            _log.warning(
                "managed tool output not retained",
                extra={"tool": tool.name, "tool_call_id": ctx.tool_call_id, "error": str(exc)},
            )
            return None


def before_image(path: str, limit: int) -> FileImage | None:
    """The content of the file at *path* now (``None`` content when there is none); omitted
    when over *limit* bytes; ``None`` for a directory or other non-regular file, which no
    file tool replaces."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return FileImage(path=path, content=None)
    if not stat.S_ISREG(status.st_mode):
        return None
    if status.st_size > limit:
        return FileImage(path=path, content=None, omitted=True)
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        return FileImage(path=path, content=None, omitted=True)
    return FileImage(path=path, content=data)


def _bound_failure(result: ToolSettlement, env: ToolEnvironment) -> ToolSettlement:
    """Keep an oversized failure message within the limits too (no file is written)."""
    if isinstance(result, ToolSuccess) or not exceeds_limits(result.error, env.limits):
        return result
    error = preview(result.error, env.limits, "... error message truncated ...")
    return msgspec.structs.replace(result, error=error)


def _visible(tool: Tool[Any], agent: AgentInfo) -> bool:
    if not agent.tool_enabled(tool.name):
        return False
    return tool.permission is None or not is_wholly_denied(agent.permission, tool.permission)


def _success(output: ToolOutput) -> ToolSuccess:
    return ToolSuccess(
        content=list(output.content),
        structured=output.structured,
        output_paths=list(output.output_paths),
    )


async def _run_handler(
    tool: Tool[Any], decoded: Any, ctx: ToolContext, env: ToolEnvironment
) -> ToolOutput | ToolFailure:
    try:
        output = await tool.handler(decoded, ctx, env)
    except ToolError as exc:
        return ToolFailure(error=str(exc), structured=msgspec.to_builtins(exc.structured))
    except Exception as exc:  # a handler bug settles as a failure, never escapes
        _log.info("tool handler raised", extra={"tool": tool.name, "error": repr(exc)})
        return ToolFailure(error=str(exc) or type(exc).__name__)
    return _validate_output(tool, output)


def _validate_output(tool: Tool[Any], output: object) -> ToolOutput | ToolFailure:
    if not isinstance(output, ToolOutput):
        return ToolFailure(error=f"Invalid tool output for {tool.name}: expected ToolOutput")
    try:
        if tool.output_type is not None:
            msgspec.convert(output.structured, tool.output_type)
        structured = msgspec.to_builtins(output.structured)
    except (msgspec.ValidationError, TypeError) as exc:
        return ToolFailure(error=f"Invalid tool output for {tool.name}: {exc}")
    return msgspec.structs.replace(output, structured=structured)
