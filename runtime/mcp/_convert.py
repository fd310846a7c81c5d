"""MCP shapes to Kittiwake's and back (pure): tool input schemas, call results, prompts and
resources, all as the protocol's JSON (``model_dump(mode="json", by_alias=True)``), so
nothing here depends on the SDK's classes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec

from runtime.llm import FilePart, TextPart
from runtime.tools import ToolError, ToolOutput

__all__ = ["input_schema", "prompt_text", "resource_json", "resource_parts", "tool_output"]

_DROPPED: Final = ("$schema", "$id")


def input_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's ``inputSchema`` as providers take it, as OpenCode does: an object schema
    at the top (``type: object``, ``properties`` present, ``additionalProperties``
    false), without ``$schema``/``$id``. Nested parts are left as they are; each
    provider adapter lowers them as it lowers built-in tools' schemas."""
    out = {k: v for k, v in (schema or {}).items() if k not in _DROPPED}
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    out["additionalProperties"] = False
    return out


def _content(block: Mapping[str, Any], texts: list[str], files: list[FilePart]) -> None:
    kind = block.get("type")
    if kind == "text":
        texts.append(str(block.get("text", "")))
    elif kind in ("image", "audio"):
        mime = str(block.get("mimeType") or "application/octet-stream")
        files.append(FilePart(mime=mime, url=f"data:{mime};base64,{block.get('data', '')}"))
    elif kind == "resource":
        resource = block.get("resource") or {}
        uri = str(resource.get("uri", ""))
        mime = str(resource.get("mimeType") or "application/octet-stream")
        if "text" in resource:
            texts.append(str(resource["text"]))
        else:
            url = f"data:{mime};base64,{resource.get('blob', '')}"
            files.append(FilePart(mime=mime, url=url, filename=uri or None))
    elif kind == "resource_link":
        name = block.get("name") or block.get("uri")
        texts.append(f"Resource: {name} ({block.get('uri', '')})")


def tool_output(result: Mapping[str, Any]) -> ToolOutput:
    """A ``CallToolResult`` as a tool's output: its text parts (and the text of embedded
    text resources) joined by a blank line into one text part, images, audio and blob
    resources as ``data:`` URL file parts. ``structuredContent`` is kept as the
    structured result only when there is no content (servers send it as text too).

    Raises:
        ToolError: ``isError`` was set; the message is the result's text.
    """
    texts: list[str] = []
    files: list[FilePart] = []
    for block in result.get("content") or []:
        if isinstance(block, Mapping):
            _content(block, texts, files)
    structured = result.get("structuredContent")
    if result.get("isError"):
        raise ToolError("\n\n".join(texts) or "The MCP tool failed without a message")
    content: list[TextPart | FilePart] = [TextPart(text="\n\n".join(texts))] if texts else []
    content.extend(files)
    if content:
        return ToolOutput(content=content)
    if structured is not None:
        return ToolOutput(structured=structured)
    return ToolOutput(content=[TextPart(text="")])


def prompt_text(result: Mapping[str, Any]) -> str:
    """A ``GetPromptResult``'s messages as one template: each text content on a line,
    other content left out (as OpenCode does)."""
    lines: list[str] = []
    for message in result.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, Mapping) and content.get("type") == "text":
            lines.append(str(content.get("text", "")))
        elif isinstance(content, Mapping) and content.get("type") == "resource":
            resource = content.get("resource") or {}
            if "text" in resource:
                lines.append(str(resource["text"]))
    return "\n".join(lines)


def resource_json(server: str, resource: Mapping[str, Any]) -> dict[str, Any]:
    """OpenCode's ``McpResource`` of one listed resource of *server*."""
    out: dict[str, Any] = {
        "name": str(resource.get("name", "")), "uri": str(resource.get("uri", "")),
    }  # fmt: skip
    for key in ("description", "mimeType"):
        if isinstance(resource.get(key), str):
            out[key] = resource[key]
    out["client"] = server
    return out


def resource_parts(
    result: Mapping[str, Any], *, name: str, uri: str, max_chars: int
) -> tuple[list[str], list[FilePart]]:
    """A ``ReadResourceResult`` as what a prompt it is attached to carries, as OpenCode
    puts it in: a line ``Reading MCP resource: <name> (<uri>)``, the text of each text
    content (past *max_chars* in all, cut with a note); each blob as a ``data:`` URL file
    named *name*."""
    texts = [f"Reading MCP resource: {name} ({uri})"]
    files: list[FilePart] = []
    left = max_chars
    for content in result.get("contents") or []:
        if not isinstance(content, Mapping):
            continue
        mime = str(content.get("mimeType") or "application/octet-stream")
        if isinstance(content.get("text"), str):
            text = content["text"]
            if len(text) > left:
                text = (
                    f"{text[:left]}\n... (cut: the resource is longer than {max_chars} characters)"
                )
            left = max(0, left - len(text))
            texts.append(text)
        elif isinstance(content.get("blob"), str):
            url = f"data:{mime};base64,{content['blob']}"
            files.append(FilePart(mime=mime, url=url, filename=name))
    return texts, files


def plain(model: Any) -> dict[str, Any]:
    """A protocol object (the SDK's pydantic model) as its JSON."""
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def leaves(exc: BaseException | None) -> Iterator[BaseException]:
    """The exceptions inside *exc*, groups opened."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    elif exc is not None:
        yield exc


def encoded(value: Any) -> bytes:
    """A canonical encoding of *value*, to tell whether a listing changed."""
    return msgspec.json.encode(value, order="sorted")
