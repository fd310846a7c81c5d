"""An ACP prompt (content blocks) as a Kittiwake prompt, or as a command to run.

Text blocks are the prompt's text, in order; a resource link stands in it as its path (a
``file://`` URI) or URI, so the model can read it with its tools; an embedded text
resource stands as its path too, its text appended as a ``<file path="...">`` block (as a
command's ``@file`` mentions are); an image, or an embedded binary resource, is attached as
a ``data:`` URL. A first text block starting with ``/NAME`` names a command when the
Location has one called NAME: the rest of the text is its arguments.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from urllib.parse import unquote, urlsplit

from gateway.acp._rpc import RpcError
from gateway.acp._wire import (
    INVALID_PARAMS,
    AudioBlock,
    ContentBlock,
    ImageBlock,
    ResourceBlock,
    ResourceLinkBlock,
    TextBlock,
)
from runtime.events import FileAttachment, Prompt

__all__ = ["leading_command", "to_prompt"]


def _path(uri: str) -> str:
    """A ``file://`` URI's path; any other URI as it is."""
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme == "file" else uri


def _named(uri: str, fallback: str) -> str:
    return os.path.basename(_path(uri)) or fallback


def to_prompt(blocks: Sequence[ContentBlock]) -> Prompt:
    """The prompt *blocks* make. Raises ``RpcError`` (invalid params) for an empty prompt
    or an audio block (not advertised)."""
    text: list[str] = []
    appended: list[str] = []
    files: list[FileAttachment] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            text.append(block.text)
        elif isinstance(block, ResourceLinkBlock):
            text.append(_path(block.uri))
        elif isinstance(block, ImageBlock):
            files.append(
                FileAttachment(
                    uri=f"data:{block.mime_type};base64,{block.data}", mime=block.mime_type,
                    name=_named(block.uri or "", "image"),
                )
            )  # fmt: skip
        elif isinstance(block, ResourceBlock):
            resource = block.resource
            if resource.text is not None:
                text.append(_path(resource.uri))
                appended.append(f'<file path="{_path(resource.uri)}">\n{resource.text}\n</file>')
            elif resource.blob is not None:
                mime = resource.mime_type or "application/octet-stream"
                files.append(
                    FileAttachment(
                        uri=f"data:{mime};base64,{resource.blob}", mime=mime,
                        name=_named(resource.uri, "file"),
                    )
                )  # fmt: skip
            else:
                raise RpcError(INVALID_PARAMS, "An embedded resource needs text or blob")
        elif isinstance(block, AudioBlock):
            raise RpcError(INVALID_PARAMS, "Audio prompts are not supported")
    body = "".join(text)
    if appended:
        body = "\n\n".join([body, *appended]) if body else "\n\n".join(appended)
    if not body.strip() and not files:
        raise RpcError(INVALID_PARAMS, "The prompt is empty")
    return Prompt(text=body, files=files)


def leading_command(
    blocks: Sequence[ContentBlock], commands: Collection[str]
) -> tuple[str, str] | None:
    """``(name, arguments)`` when the prompt is ``/name arguments`` and the Location has a
    command *name*; else ``None`` (the text goes to the model as it is)."""
    if not blocks or not isinstance(blocks[0], TextBlock):
        return None
    first = blocks[0].text.lstrip()
    if not first.startswith("/"):
        return None
    words = first[1:].split(maxsplit=1)
    if not words or words[0] not in commands:
        return None
    rest = words[1] if len(words) > 1 else ""
    tail = "".join(
        b.text if isinstance(b, TextBlock) else _path(b.uri) if isinstance(b, ResourceLinkBlock)
        else ""
        for b in blocks[1:]
    )  # fmt: skip
    return words[0], (rest + tail).strip()
