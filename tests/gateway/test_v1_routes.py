"""OpenCode's V1 routes and V2 catalog routes on a served runtime (real Hypercorn, real
HTTP client): shell, fork and the catalog, each answer validated against OpenCode's
OpenAPI document."""

from __future__ import annotations

from typing import Any

import httpx

from .conftest import assert_valid, response_schema, served


def _valid(r: httpx.Response, path: str, method: str = "get") -> Any:
    assert r.status_code == 200, r.text
    assert_valid(r.json(), response_schema(path, method, 200))
    return r.json()


async def test_v2_catalog_lists_agents_models_and_providers(tmp_path: Any, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        agents = _valid(await client.get("/api/agent"), "/api/agent")
        assert agents["location"]["directory"] == str(tmp_path.resolve())
        build = next(a for a in agents["data"] if a["id"] == "build")
        assert build["mode"] == "primary"
        assert {"action": "*", "resource": "*", "effect": "allow"} in build["permissions"]

        providers = _valid(await client.get("/api/provider"), "/api/provider")
        by_id = {p["id"]: p for p in providers["data"]}
        assert by_id["anthropic"]["disabled"] is False  # its key is in the environment
        assert any(p["disabled"] for p in providers["data"])

        one = await client.get("/api/provider/anthropic")
        assert _valid(one, "/api/provider/{providerID}")["data"] == by_id["anthropic"]
        missing = await client.get("/api/provider/nope")
        assert missing.status_code == 404
        assert_valid(missing.json(), response_schema("/api/provider/{providerID}", "get", 404))

        models = _valid(await client.get("/api/model"), "/api/model")
        anthropic = [m for m in models["data"] if m["providerID"] == "anthropic"]
        assert anthropic and all(m["enabled"] for m in anthropic)
        assert {m["providerID"] for m in models["data"]} <= set(by_id)

        bad = await client.get("/api/model", params={"location[directory]": "/no/such/dir"})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
