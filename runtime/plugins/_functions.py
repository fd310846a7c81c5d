"""Tools as typed Python functions: the signature becomes the input schema.

``async def word_count(path: str, limit: int = 100) -> str`` is a tool called
``word_count`` whose JSON schema has a required string ``path`` and an integer ``limit``
defaulting to 100; its docstring is the description. A parameter annotated
:class:`~runtime.plugins.ToolCall` receives the call (session, agent, ids) instead of a
model argument. ``Annotated[str, msgspec.Meta(description=...)]`` describes a parameter.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, Final

import msgspec
import trio

from runtime.llm import TextPart
from runtime.plugins._values import ToolCall
from runtime.tools import Tool, ToolContext, ToolEnvironment, ToolOutput

__all__ = ["ToolMeta", "as_tool", "plugin_tool", "tool_call_of"]

_META: Final = "__kittiwake_tool__"


class ToolMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`plugin_tool` set: the tool's name, description and permission."""

    name: str | None = None
    description: str | None = None
    permission: str | None = None


def plugin_tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None,
    description: str | None = None, permission: str | None = None,
) -> Any:  # fmt: skip
    """Mark *fn* as a tool, optionally naming it (default: the function's name), describing
    it (default: its docstring) and giving its permission (default: its name, so rules
    such as ``"permission": {"word_count": "ask"}`` apply). Usable bare or with
    arguments; returns *fn* unchanged."""

    def mark(function: Callable[..., Any]) -> Callable[..., Any]:
        meta = ToolMeta(name=name, description=description, permission=permission)
        setattr(function, _META, meta)
        return function

    return mark(fn) if fn is not None else mark


def tool_call_of(ctx: ToolContext, tool: str) -> ToolCall:
    """The :class:`ToolCall` hooks and function tools see for the call *ctx*."""
    return ToolCall(
        tool=tool, session_id=ctx.session_id, agent=ctx.agent, call_id=ctx.tool_call_id,
        message_id=ctx.assistant_message_id, directory=ctx.directory,
    )  # fmt: skip


def as_tool(value: Any) -> Tool[Any]:
    """*value* as a ``Tool``: a ``Tool`` as it is, a function from its signature.

    Raises:
        TypeError: *value* is neither, or a parameter's annotation is not a type msgspec
            can decode.
        ValueError: the name is not a valid tool name.
    """
    if isinstance(value, Tool):
        return value
    if not callable(value):
        raise TypeError(f"not a tool or a function: {value!r}")
    meta: ToolMeta = getattr(value, _META, None) or ToolMeta()
    name: str = meta.name or str(getattr(value, "__name__", ""))
    signature = inspect.signature(value)
    hints = typing.get_type_hints(value, include_extras=True)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    call_param: str | None = None
    for param in signature.parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolCall:
            call_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs cannot be described")
        if param.default is param.empty:
            fields.append((param.name, annotation))
        else:
            fields.append((param.name, annotation, param.default))
    input_type = msgspec.defstruct(
        f"{name}_input", fields, kw_only=True, frozen=True, forbid_unknown_fields=True
    )
    msgspec.json.schema(input_type)  # an undescribable annotation fails here, at loading
    names = [f[0] for f in fields]
    is_async = inspect.iscoroutinefunction(value)

    async def handler(data: Any, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        kwargs = {n: getattr(data, n) for n in names}
        if call_param is not None:
            kwargs[call_param] = tool_call_of(ctx, name)
        if is_async:
            result = await value(**kwargs)
        else:  # a plain function may block: it runs in a worker thread
            result = await trio.to_thread.run_sync(lambda: value(**kwargs))
        return _output(result)

    description: str = meta.description or inspect.getdoc(value) or name
    return Tool(
        name=name, description=description, input_type=input_type, handler=handler,
        permission=meta.permission or name,
    )  # fmt: skip


def _output(result: Any) -> ToolOutput:
    """A function's return value as a tool's output: a ``ToolOutput`` as it is, text as
    text, ``None`` as no output, anything else as its JSON (text and structured)."""
    if isinstance(result, ToolOutput):
        return result
    if result is None:
        return ToolOutput()
    if isinstance(result, str):
        return ToolOutput(content=[TextPart(text=result)])
    structured = msgspec.to_builtins(result)
    text = msgspec.json.format(msgspec.json.encode(structured), indent=2).decode()
    return ToolOutput(content=[TextPart(text=text)], structured=structured)
