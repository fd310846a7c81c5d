"""CORS over a real server: preflights allow every method the routes use, answers of the
per-prompt routes and of the others carry the same headers, and a wildcard origin never comes with
credentials."""

from __future__ import annotations

import base64
import json

import httpx
import trio
from trio_websocket import open_websocket_url

from gateway.http._app import gateway_of

from .conftest import served

APP = "http://app.example"


def _methods(response: httpx.Response) -> set[str]:
    header = response.headers.get("access-control-allow-methods", "")
    return {m.strip() for m in header.split(",") if m.strip()}


async def test_preflight_allows_the_methods_the_routes_use(tmp_path):
    token = base64.b64encode(b"kittiwake:s3cret").decode()
    auth = {"Authorization": f"Basic {token}"}
    options = {"cors_origins": [APP], "password": "s3cret"}
    async with served(tmp_path, **options) as g, httpx.AsyncClient(base_url=g.url) as client:
        used = {r.method for r in gateway_of(g.server.app).routes} - {"WEBSOCKET"}
        assert {"GET", "POST", "PATCH", "DELETE"} <= used
        sid = (await client.post("/session", json={}, headers=auth)).json()["id"]
        for method in sorted(used):
            # a browser sends its preflight without credentials
            preflight = await client.options(
                f"/session/{sid}",
                headers={
                    "Origin": APP, "Access-Control-Request-Method": method,
                    "Access-Control-Request-Headers": "authorization, content-type, x-opencode-directory",
                },
            )  # fmt: skip
            assert preflight.status_code == 200, method
            assert preflight.headers["access-control-allow-origin"] == APP
            assert preflight.headers["access-control-allow-credentials"] == "true"
            assert used <= _methods(preflight), method
            allowed = preflight.headers["access-control-allow-headers"].lower()
            for header in ("authorization", "content-type", "x-opencode-directory"):
                assert header in allowed
            assert "Origin" in preflight.headers["vary"]

        renamed = await client.patch(
            f"/session/{sid}", json={"title": "t"}, headers={**auth, "Origin": APP}
        )
        assert renamed.status_code == 200
        assert renamed.headers["access-control-allow-origin"] == APP
        deleted = await client.delete(f"/session/{sid}", headers={**auth, "Origin": APP})
        assert deleted.status_code == 200
        assert deleted.headers["access-control-allow-origin"] == APP
        missing = await client.get("/session/ses_nope", headers={**auth, "Origin": APP})
        assert missing.status_code == 404  # errors are readable cross-origin too
        assert missing.headers["access-control-allow-origin"] == APP
        refused = await client.get("/session", headers={"Origin": APP})
        assert refused.status_code == 401
        assert refused.headers["access-control-allow-origin"] == APP

        # the per-prompt routes (health, prompt, wait) answer with the same headers
        for path in ("/api/health", "/doc"):
            answer = await client.get(path, headers={**auth, "Origin": APP})
            assert answer.status_code == 200
            assert answer.headers["access-control-allow-origin"] == APP
            assert answer.headers["access-control-allow-credentials"] == "true"
            assert "Origin" in answer.headers["vary"]
        other = await client.get("/api/health", headers={**auth, "Origin": "http://evil.example"})
        assert other.status_code == 200
        assert "access-control-allow-origin" not in other.headers
        assert "access-control-allow-credentials" not in other.headers

        # websockets are not subject to CORS: any origin, or none, opens one as before
        url = g.url.replace("http://", "ws://") + "/api/ws"
        for origin in ([], [("Origin", "http://evil.example")]):
            headers = [("Authorization", auth["Authorization"]), *origin]
            async with open_websocket_url(url, extra_headers=headers) as ws:
                await ws.send_message(
                    json.dumps({"type": "subscribe", "ref": 1, "sessionID": "ses_nope"})
                )
                with trio.fail_after(10):
                    assert json.loads(await ws.get_message())["ref"] == 1


async def test_a_wildcard_origin_is_answered_without_credentials(tmp_path):
    async with served(tmp_path, cors_origins=["*"]) as g, httpx.AsyncClient(base_url=g.url) as c:
        sid = (await c.post("/api/session", json={})).json()["data"]["id"]
        site = {"Origin": "http://any.example"}
        for response in (
            await c.get("/api/health", headers=site),
            await c.get(f"/api/session/{sid}", headers=site),
            await c.post(f"/api/session/{sid}/wait", headers=site),
            await c.options(
                f"/session/{sid}", headers={**site, "Access-Control-Request-Method": "DELETE"}
            ),
        ):
            assert response.status_code in (200, 204)
            assert response.headers["access-control-allow-origin"] == "*"
            assert "access-control-allow-credentials" not in response.headers


async def test_without_origins_no_cors_headers(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        site = {"Origin": APP}
        for response in (
            await client.get("/api/health", headers=site),
            await client.get("/session", headers=site),
            await client.options(
                "/session", headers={**site, "Access-Control-Request-Method": "POST"}
            ),
        ):
            assert not any(k.startswith("access-control-") for k in response.headers)
