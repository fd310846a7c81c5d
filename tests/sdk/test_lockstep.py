"""The SDK stays in lockstep with the route table: regenerating it from the served routes
gives what is committed, byte for byte, and a route added without regenerating shows."""

from __future__ import annotations

import ast
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import kittiwake_sdk
import pytest

from gateway.http import Answer, Route, openapi_document
from gateway.sdk import GENERATED, SDK_PACKAGE, format_sources, route_document, sdk_sources
from tests.gateway.conftest import served


def _committed() -> dict[str, str]:
    return {name: (SDK_PACKAGE / name).read_text() for name in GENERATED}


async def _noop() -> None:
    raise AssertionError("never called")


async def test_the_committed_sdk_is_what_the_route_table_generates() -> None:
    document = await route_document()
    assert format_sources(sdk_sources(document)) == _committed(), (
        "kittiwake_sdk is out of date: run `make sdk`"
    )


async def test_the_served_document_is_the_one_generated_from(tmp_path: Path) -> None:
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        served_doc = (await client.get("/doc")).json()
    assert served_doc == await route_document()


async def test_a_route_added_without_regenerating_fails_the_comparison() -> None:
    document = await route_document()
    added = Route(
        method="POST", path="/api/session/{sessionID}/pin", operation_id="v2.session.pin",
        summary="Pin a session", handler=_noop, answer=Answer(status=204, media=None),
        errors=("ConflictError",),
    )  # fmt: skip
    extra: dict[str, Any] = openapi_document([added])
    document["paths"].update(extra["paths"])
    regenerated = format_sources(sdk_sources(document))
    assert regenerated != _committed()
    assert (
        "async def session_pin(self, session_id: str) -> None:" in regenerated["_async_client.py"]
    )


def test_the_sdk_version_follows_the_server() -> None:
    assert kittiwake_sdk.__version__ == version("kittiwake") == version("kittiwake-sdk")


@pytest.mark.parametrize("path", sorted(SDK_PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_the_sdk_imports_nothing_of_the_server(path: Path) -> None:
    """The SDK is a client: it installs and runs without the server's packages."""
    server = {"actors", "gateway", "runtime", "storage", "tests"}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & server, path
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.module.split(".")[0] not in server, path
