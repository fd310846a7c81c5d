"""What a server asks of Kittiwake while it is connected: its roots (the Location),
answers of the user (``elicitation/create``) and a model's answer
(``sampling/createMessage``), through the SDK's client session callbacks.

A server's request names no tool call, so it is taken as the newest call of that server
still in flight (its session, agent and tool); with none, it is refused. While the user
or the model is being waited for, the call's own timeout stands still. The SDK handles a
server's requests one at a time on the connection's reading task, so while one waits,
the server's other messages wait too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

import runtime.llm as llm
from runtime.mcp._elicit import elicit_questions, elicit_result
from runtime.mcp._host import McpCall, McpHost
from runtime.mcp._sdk import Sdk
from runtime.tools import ToolError

__all__ = ["ServerRequests", "sampling_request", "sampling_result"]

_STOP = {"stop": "endTurn", "length": "maxTokens"}


def sampling_request(params: Mapping[str, Any], model: llm.ModelRef) -> llm.LLMRequest:
    """A ``CreateMessageRequest``'s *params* (JSON) as a request to *model*: its messages
    (text, images and audio as ``data:`` URL files), its system prompt, ``maxTokens``,
    ``temperature`` and ``stopSequences``; no tools."""
    messages: list[llm.Message] = []
    for message in params.get("messages") or []:
        blocks = message.get("content")
        blocks = blocks if isinstance(blocks, list) else [blocks]
        texts = [
            llm.TextPart(text=str(b.get("text", ""))) for b in blocks if b.get("type") == "text"
        ]
        if message.get("role") == "assistant":
            messages.append(llm.AssistantMessage(content=list(texts)))
            continue
        files = [
            llm.FilePart(
                mime=str(b.get("mimeType")),
                url=f"data:{b.get('mimeType')};base64,{b.get('data', '')}",
            )
            for b in blocks
            if b.get("type") in ("image", "audio")
        ]
        messages.append(llm.UserMessage(content=[*texts, *files]))
    system = params.get("systemPrompt")
    generation = llm.GenerationControls(
        max_output_tokens=params.get("maxTokens"), temperature=params.get("temperature"),
        stop=params.get("stopSequences"),
    )  # fmt: skip
    return llm.LLMRequest(
        model=model, system=[system] if system else [], messages=messages, tools=[],
        generation=generation,
    )  # fmt: skip


async def sampling_result(client: llm.LLMClient, request: llm.LLMRequest) -> dict[str, Any]:
    """Stream *request* through *client* to its end; its ``CreateMessageResult`` (JSON).

    Raises:
        ToolError: the provider failed.
    """
    parts: list[str] = []
    finish = "stop"
    async for event in client.stream(request):
        if isinstance(event, llm.TextDelta):
            parts.append(event.delta)
        elif isinstance(event, llm.StepFinish):
            finish = event.finish_reason
        elif isinstance(event, llm.ProviderError):
            raise ToolError(f"the model failed: {event.message}")
    model = request.model
    return {
        "role": "assistant", "content": {"type": "text", "text": "".join(parts)},
        "model": f"{model.provider_id}/{model.model_id}", "stopReason": _STOP.get(finish, finish),
    }  # fmt: skip


class ServerRequests:
    """The client session callbacks of one server (see the module docstring).

    Args:
        server: the server's name (the resource of ``mcp_sampling``).
        directory: the Location, the server's one root.
        timeout: a call's timeout (started again when the wait on the user ends).
        host: the runtime's side (``None``: elicitation and sampling are refused).
        sdk: the loaded SDK.
    """

    def __init__(
        self, *, server: str, directory: str, timeout: float,
        host: Callable[[], McpHost | None], sdk: Callable[[], Sdk | None],
    ) -> None:  # fmt: skip
        self.server = server
        self.directory = directory
        self._timeout = timeout
        self._host = host
        self._sdk = sdk
        self._calls: list[tuple[McpCall, trio.CancelScope]] = []
        self.asked = 0
        """Requests of the server answered or refused (elicitation and sampling)."""

    @contextmanager
    def calling(self, call: McpCall | None, scope: trio.CancelScope) -> Iterator[None]:
        """Mark *call* in flight under *scope* (its timeout) for the block."""
        if call is None:
            yield
            return
        entry = (call, scope)
        self._calls.append(entry)
        try:
            yield
        finally:
            self._calls.remove(entry)

    @contextmanager
    def _waiting(self, scope: trio.CancelScope) -> Iterator[None]:
        """Hold the call's timeout while the user or the model is waited for."""
        scope.deadline = math.inf
        try:
            yield
        finally:
            scope.deadline = trio.current_time() + self._timeout

    def _types(self) -> Any:
        sdk = self._sdk()
        assert sdk is not None
        return sdk.types

    def _refused(self, why: str) -> Any:
        types = self._types()
        return types.ErrorData(code=types.INVALID_REQUEST, message=why)

    def _caller(self) -> tuple[McpCall, trio.CancelScope, McpHost] | str:
        host = self._host()
        if host is None:
            return "this client has no session to ask"
        if not self._calls:
            return f"no tool call of {self.server} is in flight to ask for"
        call, scope = self._calls[-1]
        return call, scope, host

    async def roots(self, context: Any) -> Any:
        """``roots/list``: the Location's directory."""
        await trio.lowlevel.checkpoint()
        path = Path(self.directory)
        return self._types().ListRootsResult(
            roots=[self._types().Root(uri=path.as_uri(), name=path.name)]
        )

    async def elicit(self, context: Any, params: Any) -> Any:
        """``elicitation/create``: the user's answers, asked as a durable question of the
        calling session (``runtime.mcp._elicit``)."""
        self.asked += 1
        found = self._caller()
        if isinstance(found, str):
            await trio.lowlevel.checkpoint()
            return self._refused(found)
        call, scope, host = found
        data = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        with self._waiting(scope):
            answers = await host.ask(call, elicit_questions(self.server, data))
        return self._types().ElicitResult.model_validate(elicit_result(data, answers))

    async def sample(self, context: Any, params: Any) -> Any:
        """``sampling/createMessage``: the calling session's model's answer, once the
        permission ``mcp_sampling`` on this server is granted; an error when it is not or
        the model failed."""
        self.asked += 1
        found = self._caller()
        if isinstance(found, str):
            await trio.lowlevel.checkpoint()
            return self._refused(found)
        call, scope, host = found
        data = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            with self._waiting(scope):
                model, client = await host.sampling_model(call, self.server)
                result = await sampling_result(client, sampling_request(data, model))
        except ToolError as exc:
            return self._refused(str(exc))
        return self._types().CreateMessageResult.model_validate(result)
