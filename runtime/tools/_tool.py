"""Tool definitions: a name, a description, a msgspec input type and an async handler."""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, TypeAlias, TypeVar, final

import msgspec

from runtime.agents import AgentInfo
from runtime.llm import ToolDefinition
from runtime.tools._model import ToolContext, ToolEnvironment, ToolOutput

__all__ = ["ResourceExtractor", "TOOL_NAME_PATTERN", "Tool", "ToolHandler", "input_schema"]

_SCHEMA_CACHE: Final = 512  # tool input types whose schemas are kept
TOOL_NAME_PATTERN: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")

InputT = TypeVar("InputT")
ToolHandler: TypeAlias = Callable[[InputT, ToolContext, ToolEnvironment], Awaitable[ToolOutput]]
ResourceExtractor: TypeAlias = Callable[[InputT, ToolEnvironment], list[str]]


@final
class Tool(Generic[InputT]):
    """One tool definition.

    Args:
        name: matches ``^[A-Za-z][A-Za-z0-9_-]{0,63}$``.
        description: model-visible description.
        input_type: a msgspec-decodable type (usually a Struct); its JSON schema
            is advertised and every call's input is validated against it.
        handler: ``async (input, ToolContext, ToolEnvironment) -> ToolOutput``;
            raise ``ToolError`` (or anything else) to fail the call.
        permission: the permission name checked before running, or ``None`` for
            a tool that needs no authorization.
        resources: the resources of a call (canonical paths, a command, ...);
            defaults to ``["*"]``. May raise ``ToolError`` to refuse the call.
        output_type: if given, ``ToolOutput.structured`` is validated against it.
        touched: for a tool that edits files, the paths (relative to the Location) a
            successful call's structured output names; the registry's edit observer
            (language server diagnostics) looks at them.
        describe: if given, the description advertised to an agent (``definition(agent)``),
            e.g. a catalog filtered by the agent's permission rules.
        changes: for a tool that changes files, the absolute paths a call may change; the
            registry records their content before the handler runs (``settle``'s
            ``before_change``), so that a revert can restore them. May raise ``ToolError``.
        schema: the JSON schema advertised instead of *input_type*'s (a tool whose
            inputs another program describes, such as an MCP server's); *input_type*
            still decodes each call's input.

    Raises:
        ValueError: the name is invalid.
    """

    __slots__ = (
        "changes",
        "describe",
        "description",
        "handler",
        "input_type",
        "name",
        "output_type",
        "permission",
        "resources",
        "schema",
        "touched",
    )

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_type: type[InputT],
        handler: ToolHandler[InputT],
        permission: str | None = None,
        resources: ResourceExtractor[InputT] | None = None,
        output_type: Any = None,
        describe: Callable[[AgentInfo], str] | None = None,
        touched: Callable[[Any], list[str]] | None = None,
        changes: ResourceExtractor[InputT] | None = None,
        schema: dict[str, Any] | None = None,
    ) -> None:
        if not TOOL_NAME_PATTERN.match(name):
            raise ValueError(f"Invalid tool name: {name!r}")
        self.name = name
        self.description = description
        self.input_type = input_type
        self.handler = handler
        self.permission = permission
        self.resources = resources
        self.output_type = output_type
        self.touched = touched
        self.describe = describe
        self.changes = changes
        self.schema = input_schema(input_type) if schema is None else schema

    def definition(self, agent: AgentInfo | None = None) -> ToolDefinition:
        """The model-visible definition (as advertised to *agent*, when given)."""
        description = self.description
        if agent is not None and self.describe is not None:
            description = self.describe(agent)
        return ToolDefinition(name=self.name, description=description, input_schema=self.schema)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"


def input_schema(input_type: Any) -> dict[str, Any]:
    """JSON schema of *input_type* with the top-level ``$ref`` inlined.

    Providers expect an object schema at the top; nested definitions stay in
    ``$defs`` when something still refers to them. Each call returns a fresh dict;
    the schema of a type is worked out once (tool registries are built per Location).
    """
    try:
        encoded = _cached_schema(input_type)
    except TypeError:  # an unhashable type expression
        encoded = _encoded_schema(input_type)
    return msgspec.json.decode(encoded)


def _encoded_schema(input_type: Any) -> bytes:
    schema = msgspec.json.schema(input_type)
    defs: dict[str, Any] = dict(schema.pop("$defs", {}))
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        schema = dict(defs[ref.removeprefix("#/$defs/")])
    if defs and "#/$defs/" in msgspec.json.encode(schema).decode():
        schema["$defs"] = defs
    return msgspec.json.encode(schema)


_cached_schema = functools.lru_cache(maxsize=_SCHEMA_CACHE)(_encoded_schema)
