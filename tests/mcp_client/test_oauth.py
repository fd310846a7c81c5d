"""Signing in to a protected MCP server (``oauth_server.py``: FastMCP over Streamable HTTP
behind a small authorization server) through OpenCode's routes on a served runtime (real
Hypercorn on 127.0.0.1), answers checked against OpenCode's OpenAPI document."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import trio

from actors import Runtime
from gateway import Server, serve
from runtime.config import McpServerConfig
from runtime.llm import ScriptedLLM
from runtime.mcp import redirect_uri, spec_of
from tests.gateway.conftest import assert_valid, component, response_schema
from tests.mcp_client.conftest import (
    SDK_SSE_GENERATORS,
    configure,
    connected,
    free_port,
    mcp_runtime,
    oauth_servers,
)

pytestmark = SDK_SSE_GENERATORS


@asynccontextmanager
async def served(
    tmp_path: Path, config: dict[str, Any]
) -> AsyncIterator[tuple[Runtime, str, Path]]:
    async with mcp_runtime(tmp_path, config, ScriptedLLM([])) as (rt, work):
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
            try:
                yield rt, server.url, work
            finally:
                server.stop()


def remote(url: str, port: int, **oauth: Any) -> dict[str, Any]:
    return {"type": "remote", "url": url, "oauth": {"callbackPort": port, **oauth}}


async def browse(url: str) -> httpx.Response:
    """What a browser does with the authorization URL: the authorization server approves
    at once and redirects to the callback, which is followed."""
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
        return await browser.get(url)


async def redirected(url: str) -> tuple[str, str, str]:
    """The callback URL the authorization server sends the browser to, not followed:
    ``(callback URL, code, state)``."""
    async with httpx.AsyncClient(timeout=30) as browser:
        answer = await browser.get(url)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    query = parse_qs(urlsplit(location).query)
    return location, query["code"][0], query["state"][0]


async def as_log(issuer: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{issuer}/log")).json()  # type: ignore[no-any-return]


async def expire_tokens(issuer: str) -> None:
    async with httpx.AsyncClient() as client:
        (await client.post(f"{issuer}/expire")).raise_for_status()


def stored(rt: Runtime) -> dict[str, Any]:
    path = Path(rt.execution.mcp_oauth.store.path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return json.loads(path.read_text())  # type: ignore[no-any-return]


async def test_sign_in_end_to_end_then_refresh(tmp_path: Path):
    port = free_port()
    async with oauth_servers() as (issuer, url):
        async with served(tmp_path, {"mcp": {"web": remote(url, port)}}) as (rt, base, work):
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                before = await http.get("/mcp")
                started = await http.post("/mcp/web/auth")
                page = await browse(started.json()["authorizationUrl"])
                server = await connected(rt, work, "web")
                after = await http.get("/mcp")
            whoami = await server.call("whoami", {})
            added = await server.call("add", {"a": 2, "b": 3})
            signed_in = stored(rt)["web"]
            first_log = await as_log(issuer)

            # Two hours later by the clock: the token is refreshed before it is sent (the
            # server would still take the old one).
            oauth = rt.execution.mcp_oauth
            oauth.now = lambda: time.time() + 7200
            later = await server.call("whoami", {})
            refreshed = stored(rt)["web"]["tokens"]
            proactive_log = await as_log(issuer)

            # The authorization server drops the tokens early: a 401, one refresh, again.
            oauth.now = time.time
            await expire_tokens(issuer)
            again = await server.call("add", {"a": 1, "b": 1})
            last_log = await as_log(issuer)
    assert before.json()["web"] == {"status": "needs_auth"}
    assert started.status_code == 200
    assert_valid(started.json(), response_schema("/mcp/{name}/auth", "post", 200))
    query = parse_qs(urlsplit(started.json()["authorizationUrl"]).query)
    assert started.json()["authorizationUrl"].startswith(f"{issuer}/authorize?")
    assert query["state"] == [started.json()["oauthState"]]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["redirect_uri"] == [f"http://127.0.0.1:{port}/mcp/oauth/callback"]
    assert query["resource"] == [url] and query["scope"] == ["mcp"]
    assert page.status_code == 200 and "signed in to web" in page.text
    assert after.json()["web"] == {"status": "connected"}
    assert_valid(after.json(), response_schema("/mcp", "get", 200))
    registration = first_log["registrations"][0]
    assert registration["client_name"] == "Kittiwake"
    assert registration["token_endpoint_auth_method"] == "none"
    assert registration["redirect_uris"] == [f"http://127.0.0.1:{port}/mcp/oauth/callback"]
    client_id = signed_in["clientInfo"]["clientId"]
    assert whoami["content"][0]["text"] == client_id and added["structuredContent"] == {"result": 5}
    assert signed_in["serverUrl"] == url and signed_in["tokens"]["refreshToken"]
    assert signed_in["tokens"]["expiresAt"] > time.time() + 3000
    assert "codeVerifier" not in signed_in and "oauthState" not in signed_in
    assert first_log["grants"] == [{"kind": "authorization_code", "resource": url}]
    assert later["content"][0]["text"] == client_id
    assert [g["kind"] for g in proactive_log["grants"]] == ["authorization_code", "refresh_token"]
    assert refreshed["accessToken"] != signed_in["tokens"]["accessToken"]
    assert again["structuredContent"] == {"result": 2}
    kinds = [g["kind"] for g in last_log["grants"]]
    assert kinds == ["authorization_code", "refresh_token", "refresh_token"]
    assert server.starts == 1  # both refreshes happened inside the one connection


async def test_a_wrong_state_is_refused_on_both_paths(tmp_path: Path):
    port = free_port()
    async with oauth_servers() as (issuer, url):
        async with served(tmp_path, {"mcp": {"web": remote(url, port)}}) as (rt, base, work):
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                started = (await http.post("/mcp/web/auth")).json()
                location, code, state = await redirected(started["authorizationUrl"])
                forged = location.replace(f"state={state}", "state=forged")
                async with httpx.AsyncClient() as browser:
                    browser_forged = await browser.get(forged)
                    browser_bare = await browser.get(location.split("&state=")[0])
                posted_forged = await http.post(
                    "/mcp/web/auth/callback", json={"code": code, "state": "forged"}
                )
                posted_bare = await http.post("/mcp/web/auth/callback", json={"code": code})
                still = await http.get("/mcp")
                pending = rt.execution.mcp_oauth.pending("web")
                posted = await http.post(
                    "/mcp/web/auth/callback", json={"code": code, "state": state}
                )
                async with httpx.AsyncClient() as browser:
                    replayed = await browser.get(location)
                unknown = await http.post(
                    "/mcp/nope/auth/callback", json={"code": "x", "state": "y"}
                )
            log = await as_log(issuer)
    assert browser_forged.status_code == 400 and "Invalid or expired state" in browser_forged.text
    assert browser_bare.status_code == 400 and "Missing required state" in browser_bare.text
    for refused in (posted_forged, posted_bare):
        assert refused.status_code == 400
        assert_valid(refused.json(), response_schema("/mcp/{name}/auth/callback", "post", 400))
        assert refused.json()["_tag"] == "InvalidRequestError"
    assert "state" in posted_forged.json()["message"]
    assert still.json()["web"] == {"status": "needs_auth"} and pending is not None
    assert posted.status_code == 200 and posted.json() == {"status": "connected"}
    assert_valid(posted.json(), response_schema("/mcp/{name}/auth/callback", "post", 200))
    assert replayed.status_code == 400  # the flow is over: its state is no longer known
    assert unknown.status_code == 404
    assert_valid(unknown.json(), component("McpServerNotFoundError"))
    assert [g["kind"] for g in log["grants"]] == ["authorization_code"]


async def test_tokens_are_kept_to_their_url_and_logout_removes_them(tmp_path: Path):
    port = free_port()
    async with oauth_servers() as (issuer, url):
        other = url.replace("127.0.0.1", "localhost")
        config = {"mcp": {"web": remote(url, port)}}
        async with served(tmp_path, config) as (rt, base, work):
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                await browse((await http.post("/mcp/web/auth")).json()["authorizationUrl"])
                await connected(rt, work, "web")
                configure(work, {"mcp": {"web": remote(other, port)}})
                moved = await http.get("/mcp")
                configure(work, config)
                back = await http.get("/mcp")
                removed = await http.delete("/mcp/web/auth")
                entry_after = rt.execution.mcp_oauth.store.load().get("web")
                after = await http.get("/mcp")
                missing = await http.delete("/mcp/nope/auth")
            log = await as_log(issuer)
    assert moved.json()["web"] == {"status": "needs_auth"}
    to_other = [r for r in log["requests"] if r["host"].startswith("localhost")]
    assert to_other and not any(r["bearer"] for r in to_other)
    assert back.json()["web"] == {"status": "connected"}
    assert removed.status_code == 200 and removed.json() == {"success": True}
    assert_valid(removed.json(), response_schema("/mcp/{name}/auth", "delete", 200))
    assert entry_after is None
    assert after.json()["web"] == {"status": "needs_auth"}
    assert missing.status_code == 404


async def test_authenticate_opens_the_browser_and_waits(tmp_path: Path):
    port = free_port()
    opened: list[str] = []

    async def browser(url: str) -> bool:
        opened.append(url)
        await browse(url)
        return True

    async with oauth_servers() as (issuer, url):
        config = {"mcp": {"web": remote(url, port), "here": {"type": "local", "command": ["x"]}}}
        async with served(tmp_path, config) as (rt, base, work):
            rt.execution.mcp_oauth.open_browser = browser
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                done = await http.post("/mcp/web/auth/authenticate")
                again = await http.post("/mcp/web/auth")
                local = await http.post("/mcp/here/auth")
    assert done.status_code == 200 and done.json() == {"status": "connected"}
    assert_valid(done.json(), response_schema("/mcp/{name}/auth/authenticate", "post", 200))
    assert len(opened) == 1 and opened[0].startswith(f"{issuer}/authorize?")
    assert again.json() == {"authorizationUrl": "", "oauthState": ""}  # already signed in
    assert local.status_code == 400
    assert_valid(local.json(), response_schema("/mcp/{name}/auth", "post", 400))
    assert local.json()["message"] == "MCP server here does not support OAuth"


async def test_a_server_without_registration_needs_a_configured_client(tmp_path: Path):
    port = free_port()
    async with oauth_servers("--no-registration") as (issuer, url):
        config = {"mcp": {"web": remote(url, port)}}
        async with served(tmp_path, config) as (rt, base, work):
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                first = await http.get("/mcp")
                refused = await http.post("/mcp/web/auth")
                configure(work, {"mcp": {"web": remote(url, port, clientId="preset-client")}})
                now_needs_auth = await http.get("/mcp")
                started = await http.post("/mcp/web/auth")
                await browse(started.json()["authorizationUrl"])
                server = await connected(rt, work, "web")
            whoami = await server.call("whoami", {})
    assert first.json()["web"]["status"] == "needs_client_registration"
    assert "clientId" in first.json()["web"]["error"]
    assert_valid(first.json(), response_schema("/mcp", "get", 200))
    assert refused.status_code == 400 and refused.json()["_tag"] == "InvalidRequestError"
    assert now_needs_auth.json()["web"] == {"status": "needs_auth"}
    assert "client_id=preset-client" in started.json()["authorizationUrl"]
    assert whoami["content"][0]["text"] == "preset-client"


def test_the_redirect_uri_follows_the_oauth_options():
    def spec(oauth: Any) -> Any:
        entry = {"type": "remote", "url": "https://example.com/mcp", "oauth": oauth}
        return spec_of("s", McpServerConfig(**entry), "/tmp")

    assert redirect_uri(spec({})) == "http://127.0.0.1:19876/mcp/oauth/callback"
    assert redirect_uri(spec({"callbackPort": 4321})) == "http://127.0.0.1:4321/mcp/oauth/callback"
    custom = "http://127.0.0.1:5555/back"
    assert redirect_uri(spec({"redirectUri": custom, "callbackPort": 1})) == custom


async def test_a_redirect_uri_of_its_own_is_listened_on(tmp_path: Path):
    port = free_port()
    custom = f"http://127.0.0.1:{port}/signed/in"
    async with oauth_servers() as (issuer, url):
        config = {"mcp": {"web": {"type": "remote", "url": url, "oauth": {"redirectUri": custom}}}}
        async with served(tmp_path, config) as (rt, base, work):
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                started = (await http.post("/mcp/web/auth")).json()
                async with httpx.AsyncClient() as browser:
                    elsewhere = await browser.get(
                        f"http://127.0.0.1:{port}/mcp/oauth/callback?state=x"
                    )
                await browse(started["authorizationUrl"])
                await connected(rt, work, "web")
    assert parse_qs(urlsplit(started["authorizationUrl"]).query)["redirect_uri"] == [custom]
    assert elsewhere.status_code == 404
