"""A plugin's ``auth`` hook: its providers' login methods through OpenCode's provider login
routes (a real Hypercorn server on 127.0.0.1) and ``kittiwake auth login`` (a real
subprocess), the credential stored in the data dir's ``auth.json``, and its ``loader``
turning that credential into the provider's options for requests, answered by a local
chat-completions server."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import trio

from actors import Configuration, ProviderClients, Runtime
from gateway import Server, serve
from runtime import llm
from runtime.llm import OAuthCredential, ScriptedLLM
from runtime.plugins import AuthMethod, OAuthAuthorization, PluginLimits, ProviderAuth, hookimpl
from tests.config.conftest import base_env, chat_text
from tests.execution.conftest import prompt
from tests.gateway.conftest import OPENAPI
from tests.llm.conftest import LocalServer
from tests.plugins.conftest import plugin_runtime, session
from tests.plugins.test_cli import kittiwake

CORP_PLUGIN = """
from runtime.plugins import (
    AuthFailed, AuthMethod, AuthOption, AuthPrompt, OAuthAuthorization, OAuthCredential,
    ProviderAuth, hookimpl,
)

name = "corp"
PORT = {port}


@hookimpl
def provider():
    model = {{"name": "m", "limit": {{"context": 8000, "output": 1000}}}}
    return {{"corp": {{"npm": "@ai-sdk/openai-compatible", "name": "Corp", "env": ["CORP_KEY"],
                       "models": {{"m": model}}}}}}


@hookimpl
def auth():
    async def authorize(inputs):
        team = inputs["team"]

        async def callback(code):
            if code != "good-code":
                raise AuthFailed("the single sign-on refused the code")
            return OAuthCredential(access=f"tok-{{team}}", refresh="r", account_id=team)

        return OAuthAuthorization(
            url=f"https://sso.corp.example/authorize?team={{team}}",
            instructions="Paste the code the sign-on page shows", method="code",
            callback=callback,
        )

    async def loader(credential):
        if isinstance(credential, OAuthCredential):  # the gateway for single sign-on
            base = f"http://127.0.0.1:{{PORT}}/v1"
            return {{"baseURL": base, "headers": {{"x-corp-team": credential.account_id}}}}
        return {{"baseURL": credential.metadata["gateway"]}}

    team = AuthPrompt(type="select", key="team", message="Your team", options=[
        AuthOption(label="Blue", value="blue"), AuthOption(label="Red", value="red", hint="ops"),
    ])
    gateway = AuthPrompt(type="text", key="gateway", message="Gateway URL",
                         placeholder="https://llm.corp.example/v1")
    return ProviderAuth(provider="corp", loader=loader, methods=[
        AuthMethod(type="oauth", label="Corp single sign-on", prompts=[team],
                   authorize=authorize),
        AuthMethod(type="api", label="Gateway key", prompts=[gateway]),
    ])
"""


def _schema(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}", "components": OPENAPI["components"]}


def _write_plugin(project: Path, port: int) -> None:
    folder = project / ".kittiwake" / "plugins"
    folder.mkdir(parents=True)
    (folder / "corp.py").write_text(CORP_PLUGIN.format(port=port))


@asynccontextmanager
async def _corp_runtime(
    tmp_path: Path, port: int, nursery: trio.Nursery
) -> AsyncIterator[tuple[Runtime, Path, LocalServer]]:
    """A runtime whose Location ``tmp_path/work`` has the corp plugin file and the model
    ``corp/m``; provider clients reading the data dir's credential store; the local
    server (listening on *port*, or a port of its own when 0)."""
    server = LocalServer()
    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, port, host="127.0.0.1"))
    server.port = listeners[0].socket.getsockname()[1]
    work = tmp_path / "work"
    if not (work / ".kittiwake").exists():
        _write_plugin(work, server.port)
    store = llm.CredentialStore(tmp_path / "data")
    clients = ProviderClients(llm.Catalog.from_models_dev({}), llm.Auth(env={}, store=store))
    configuration = Configuration(env={"HOME": str(tmp_path)}, llm_for=clients)
    try:
        async with plugin_runtime(
            tmp_path, ScriptedLLM([]), config={"model": "corp/m"}, configuration=configuration
        ) as (rt, work):
            yield rt, work, server
    finally:
        await clients.aclose()


async def _ask(rt: Runtime, work: Path, text: str) -> str:
    sid = await session(rt, work)
    await rt.sessions.prompt(sid, prompt=prompt(text))
    await rt.sessions.wait_idle(sid)
    info, context = await rt.sessions.get(sid), await rt.sessions.context(sid)
    return f"{info.last_error} {context[-1]}"


async def test_an_oauth_login_over_the_routes_reaches_the_providers_requests(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    async with _corp_runtime(tmp_path, 0, nursery) as (rt, work, provider):
        before = await _ask(rt, work, "before the login")
        server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            methods = await http.get("/provider/auth")
            oauth = "/provider/corp/oauth"
            missing = await http.post(f"{oauth}/authorize", json={"method": 1})  # the api one
            unknown = await http.post("/provider/nope/oauth/authorize", json={"method": 0})
            early = await http.post(f"{oauth}/callback", json={"method": 0, "code": "c"})
            started = await http.post(
                f"{oauth}/authorize", json={"method": 0, "inputs": {"team": "blue"}}
            )
            no_code = await http.post(f"{oauth}/callback", json={"method": 0})
            refused = await http.post(f"{oauth}/callback", json={"method": 0, "code": "bad"})
            stored_after_refusal = (tmp_path / "data" / "auth.json").exists()
            await http.post(f"{oauth}/authorize", json={"method": 0, "inputs": {"team": "blue"}})
            done = await http.post(f"{oauth}/callback", json={"method": 0, "code": "good-code"})
            plugins = (await http.get("/plugin")).json()
        server.stop()
        provider.queue(chat_text("answered through the company's gateway"))
        after = await _ask(rt, work, "after the login")
    assert methods.status_code == 200, methods.text
    jsonschema.validate(
        methods.json(),
        {"type": "object", "additionalProperties": {"type": "array", "items": _schema(
            "ProviderAuthMethod")}, "components": OPENAPI["components"]},
    )  # fmt: skip
    assert methods.json() == {"corp": [
        {"type": "oauth", "label": "Corp single sign-on", "prompts": [{
            "type": "select", "key": "team", "message": "Your team", "options": [
                {"label": "Blue", "value": "blue"},
                {"label": "Red", "value": "red", "hint": "ops"}]}]},
        {"type": "api", "label": "Gateway key", "prompts": [{
            "type": "text", "key": "gateway", "message": "Gateway URL",
            "placeholder": "https://llm.corp.example/v1"}]},
    ]}  # fmt: skip
    for refusal, tag in ((missing, "ProviderAuthOauthMissing"),
                         (unknown, "ProviderAuthOauthMissing"),
                         (early, "ProviderAuthOauthMissing"),
                         (no_code, "ProviderAuthOauthCodeMissing"),
                         (refused, "ProviderAuthOauthCallbackFailed")):  # fmt: skip
        assert refusal.status_code == 400, refusal.text
        assert refusal.json()["_tag"] == tag, refusal.text
    assert refused.json()["message"] == "the single sign-on refused the code"
    assert not stored_after_refusal
    assert started.status_code == 200, started.text
    jsonschema.validate(started.json(), _schema("ProviderAuthAuthorization"))
    assert started.json() == {
        "url": "https://sso.corp.example/authorize?team=blue", "method": "code",
        "instructions": "Paste the code the sign-on page shows",
    }  # fmt: skip
    assert done.status_code == 200 and done.json() is True, done.text
    stored = json.loads((tmp_path / "data" / "auth.json").read_text())["corp"]
    assert (stored["type"], stored["access"], stored["account_id"]) == ("oauth", "tok-blue", "blue")
    assert [p["hooks"] for p in plugins] == [["auth", "provider"]]
    assert "no endpoint for corp/m" in before  # no login: no loader's options
    [request] = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer tok-blue"
    assert request.headers["x-corp-team"] == "blue"  # the loader's options
    assert "answered through the company's gateway" in after


async def test_kittiwake_auth_login_asks_the_plugins_methods_and_the_key_reaches_requests(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    gateway = LocalServer()
    listeners = await nursery.start(partial(trio.serve_tcp, gateway.handle, 0, host="127.0.0.1"))
    gateway.port = listeners[0].socket.getsockname()[1]
    work = tmp_path / "work"
    _write_plugin(work, 1)  # the oauth method's gateway is not used here
    env = base_env(tmp_path)
    env["KITTIWAKE_DATA_DIR"] = str(tmp_path / "data")
    oauth = await kittiwake(
        sys.executable, "auth", "login", "corp", cwd=work, env=env,
        stdin=b"1\nred\ngood-code\n",
    )  # fmt: skip
    assert oauth.returncode == 0, oauth.stderr.decode()
    said = oauth.stderr.decode()
    assert "  1. Corp single sign-on\n  2. Gateway key\n" in said
    assert "  1. Blue\n  2. Red (ops)\n" in said
    assert "kittiwake: open https://sso.corp.example/authorize?team=red\n" in said
    path = tmp_path / "data" / "auth.json"
    assert said.splitlines()[-1].endswith(f"kittiwake: stored the credential of corp in {path}")
    assert json.loads(path.read_text())["corp"]["access"] == "tok-red"
    url = f"http://127.0.0.1:{gateway.port}/v1"
    api = await kittiwake(
        sys.executable, "auth", "login", "corp", cwd=work, env=env,
        stdin=f"2\n{url}\nsk-corp\n".encode(),
    )  # fmt: skip
    assert api.returncode == 0, api.stderr.decode()
    assert json.loads(path.read_text()) == {
        "corp": {"type": "api", "key": "sk-corp", "metadata": {"gateway": url}}
    }
    bad = await kittiwake(
        sys.executable, "auth", "login", "corp", cwd=work, env=env, stdin=b"3\n"
    )  # fmt: skip
    assert bad.returncode == 1 and "'3' is none of the choices" in bad.stderr.decode()
    gateway.queue(chat_text("from the gateway the key names"))
    async with _corp_runtime(tmp_path, 0, nursery) as (rt, work, _):
        answer = await _ask(rt, work, "hello")
    [request] = gateway.requests
    assert request.headers["authorization"] == "Bearer sk-corp"
    assert "x-corp-team" not in request.headers
    assert "from the gateway the key names" in answer


class Browser:
    """An ``auto`` login (the plugin learns of the sign-in itself: here, when the test's
    browser comes back) and one whose sign-in never comes back."""

    name = "browser"

    def __init__(self) -> None:
        self.waiting = trio.Event()
        self.back = trio.Event()

    @hookimpl
    def auth(self) -> list[ProviderAuth]:
        async def authorize(inputs: dict[str, str]) -> OAuthAuthorization:
            async def callback() -> OAuthCredential:
                self.waiting.set()
                await self.back.wait()
                return OAuthCredential(access="tok-auto")

            return OAuthAuthorization(url="https://sso.example/a", instructions="", method="auto",
                                      callback=callback)  # fmt: skip

        async def never(inputs: dict[str, str]) -> OAuthAuthorization:
            return OAuthAuthorization(url="https://sso.example/b", instructions="", method="auto",
                                      callback=trio.sleep_forever)  # fmt: skip

        return [
            ProviderAuth(provider="auto", methods=[
                AuthMethod(type="oauth", label="Browser", authorize=authorize)]),
            ProviderAuth(provider="stuck", methods=[
                AuthMethod(type="oauth", label="Never", authorize=never)]),
        ]  # fmt: skip


async def test_an_auto_login_waits_for_its_callback_bounded_by_the_login_timeout(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    browser = Browser()
    limits = PluginLimits(login_timeout=1.0)
    async with plugin_runtime(
        tmp_path, ScriptedLLM([]), plugins=[browser], plugin_limits=limits
    ) as (rt, work):
        server: Server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            for provider in ("auto", "stuck"):
                started = await http.post(f"/provider/{provider}/oauth/authorize",
                                          json={"method": 0})  # fmt: skip
                assert started.json()["method"] == "auto", started.text
            stuck = await http.post("/provider/stuck/oauth/callback", json={"method": 0})
            answers: list[httpx.Response] = []
            async with trio.open_nursery() as waiting:

                async def finish() -> None:
                    body = {"method": 0}
                    answers.append(await http.post("/provider/auto/oauth/callback", json=body))

                waiting.start_soon(finish)
                await browser.waiting.wait()
                assert answers == []  # the browser has not come back yet
                browser.back.set()
            [done] = answers
            listed = (await http.get("/plugin")).json()
        server.stop()
    assert (done.status_code, done.json()) == (200, True)
    stored = json.loads((tmp_path / "data" / "auth.json").read_text())
    assert stored == {"auto": {"type": "oauth", "access": "tok-auto", "refresh": None,
                               "expires_at": None, "account_id": None, "base_url": None,
                               "headers": {}}}  # fmt: skip
    assert stuck.status_code == 400
    assert stuck.json()["_tag"] == "ProviderAuthOauthCallbackFailed"
    assert stuck.json()["message"] == "timed out after 1 s"
    assert listed[0]["error"] == "auth: timed out after 1 s"
