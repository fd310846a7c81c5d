"""One route table: what Quart serves and what ``/doc`` documents are the same set of routes, and the document is a valid OpenAPI 3.1 document."""

from __future__ import annotations

from typing import Any

import httpx
from openapi_spec_validator import validate as validate_openapi
from quart import request

from gateway.http._app import gateway_of
from gateway.http._routes import quart_path

from .conftest import OPENAPI, served

_AUTOMATIC = {"HEAD", "OPTIONS"}  # Quart answers these for every rule by itself


def _served_rules(app: Any) -> set[tuple[str, str, str]]:
    """(method, Quart rule, endpoint) of every rule Quart serves; websockets as ``WEBSOCKET``."""
    out: set[tuple[str, str, str]] = set()
    for rule in app.url_map.iter_rules():
        methods = {"WEBSOCKET"} if rule.websocket else set(rule.methods or ()) - _AUTOMATIC
        out |= {(method, rule.rule, rule.endpoint) for method in methods}
    return out


async def test_every_served_route_is_one_table_entry_and_one_documented_operation(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        doc = (await client.get("/doc")).json()
        app = g.server.app
        routes = gateway_of(app).routes
    validate_openapi(doc)
    table = {(r.method, quart_path(r.path), r.operation_id) for r in routes}
    assert len(table) == len(routes)
    assert _served_rules(app) == table
    documented = {
        (method.upper(), path, op["operationId"])
        for path, item in doc["paths"].items()
        for method, op in item.items()
    }
    as_documented = {
        ("GET" if r.method == "WEBSOCKET" else r.method, r.path, r.operation_id) for r in routes
    }
    assert documented == as_documented
    ids = [op_id for _, _, op_id in documented]
    assert len(ids) == len(set(ids))


async def test_operation_ids_and_request_bodies_follow_the_opencode_reference(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        doc = (await client.get("/doc")).json()
    shared = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            reference = OPENAPI["paths"].get(path, {}).get(method)
            if reference is not None:
                shared += 1
                assert op["operationId"] == reference["operationId"], (method, path)
            if "requestBody" in op:
                assert op["responses"]["400"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorBody"
                }
    assert shared >= 30  # the V2 session routes and OpenCode's config/file/log routes


async def test_quart_is_the_one_router_the_per_prompt_routes_included(tmp_path):
    """Every request, the ones a client sends per prompt included, passes Quart's hooks
    (where the guards are): there is no second path in front of it."""
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        app = g.server.app
        seen: list[str] = []

        @app.before_request
        async def _record() -> None:
            seen.append(f"{request.method} {request.path}")

        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
        assert (await client.get("/api/health")).json() == {"healthy": True}
        receipt = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "a"}})
        assert receipt.status_code == 200
        assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
        assert (await client.get(f"/api/session/{sid}")).status_code == 200
        assert seen == [
            "POST /api/session", "GET /api/health", f"POST /api/session/{sid}/prompt",
            f"POST /api/session/{sid}/wait", f"GET /api/session/{sid}",
        ]  # fmt: skip


async def test_every_declared_body_is_decoded_by_the_table_before_its_handler_runs(tmp_path):
    """A body that is not JSON, or not the declared type, is a 400 ``InvalidRequestError``
    for every route declaring one, before anything else is looked up (the path's ids here
    exist nowhere)."""
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        routes = [r for r in gateway_of(g.server.app).routes if r.body is not None]
        for route in routes:
            path = route.path.replace("{", "nope_").replace("}", "")
            for body, message in ((b"{not json", "Malformed JSON"), (b"[1]", "Invalid request")):
                r = await client.request(route.method, path, content=body)
                assert r.status_code == 400, (route.operation_id, r.text)
                assert r.json()["_tag"] == "InvalidRequestError", route.operation_id
                assert r.json()["message"].startswith(message), (route.operation_id, r.text)
