"""A served runtime on 127.0.0.1 (real Hypercorn, real DuckDB) and OpenAPI validation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio

from gateway import Server, serve
from runtime import open_runtime
from runtime.llm import (
    LLMEvent,
    LLMRequest,
    ScriptedLLM,
    StepFinish,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
    Usage,
)

OPENAPI = json.loads(Path("/work/shared/reference/opencode-openapi.json").read_text())


def answer(text: str, *, chunks: int = 2) -> list[LLMEvent]:
    """One provider step that says *text* in *chunks* deltas."""
    size = max(1, len(text) // chunks)
    deltas = [TextDelta(id="t1", delta=text[i : i + size]) for i in range(0, len(text), size)]
    return [
        StepStart(),
        TextStart(id="t1"),
        *deltas,
        TextEnd(id="t1"),
        StepFinish(finish_reason="stop", usage=Usage(input_tokens=3, output_tokens=2)),
    ]


def echo_llm() -> ScriptedLLM:
    def script(request: LLMRequest) -> Sequence[LLMEvent]:
        return answer(f"answer {len(request.messages)}")

    return ScriptedLLM(script)


@dataclass
class Served:
    rt: Any
    server: Server
    llm: ScriptedLLM
    url: str


@asynccontextmanager
async def served(
    tmp_path: Path, *, llm: ScriptedLLM | None = None, agents: Any = None,
    configuration: Any = None, **options: Any,
) -> AsyncIterator[Served]:  # fmt: skip
    """Open a runtime in *tmp_path* and serve it on a free port until the block ends (with
    *configuration*, the Locations read their ``kittiwake.json`` files)."""
    client = llm or echo_llm()
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, agents=agents, configuration=configuration
    ) as rt:
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(
                partial(serve, rt, "127.0.0.1", 0, directory=tmp_path, **options)
            )
            try:
                yield Served(rt=rt, server=server, llm=client, url=server.url)
            finally:
                server.stop()


def response_schema(path: str, method: str, status: int) -> dict[str, Any]:
    op = OPENAPI["paths"][path][method]
    schema = op["responses"][str(status)]["content"]["application/json"]["schema"]
    return {**schema, "components": OPENAPI["components"]}


def component(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}", "components": OPENAPI["components"]}


def assert_valid(body: Any, schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(schema).validate(body)


@pytest.fixture
def openapi() -> dict[str, Any]:
    return OPENAPI
