"""Credential resolution, the 0600 store, and OAuth exchanges against a local server."""

import base64
import hashlib
import json
import stat
import urllib.parse

import pytest
import trio

from runtime.llm import (
    ApiKeyCredential,
    Auth,
    AuthError,
    CatalogProvider,
    CredentialStore,
    DeviceCode,
    OAuthCredential,
    copilot_device_login,
    jwt_account_id,
    new_pkce,
    openai_authorize_url,
    openai_exchange_code,
    openai_refresh,
)

from .conftest import Reply


def provider(**kwargs) -> CatalogProvider:
    kwargs.setdefault("env", ["P_KEY", "P_KEY_2"])
    return CatalogProvider(id="p", name="P", npm="@ai-sdk/openai-compatible", **kwargs)


def jwt(claims: dict) -> str:
    def enc(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{enc({'alg': 'none'})}.{enc(claims)}.sig"


class TestResolution:
    async def test_env_in_catalog_order(self):
        auth = Auth(env={"P_KEY_2": "second"})
        assert await auth.credential_for(provider()) == ApiKeyCredential(key="second")
        auth = Auth(env={"P_KEY": "first", "P_KEY_2": "second"})
        assert await auth.credential_for(provider()) == ApiKeyCredential(key="first")

    async def test_store_beats_env_and_config_beats_store(self, tmp_path):
        store = CredentialStore(tmp_path)
        store.set("p", ApiKeyCredential(key="stored"))
        auth = Auth(env={"P_KEY": "env", "CFG": "from-config"}, store=store)
        assert await auth.credential_for(provider()) == ApiKeyCredential(key="stored")
        configured = provider(options={"apiKey": "{env:CFG}"})
        assert await auth.credential_for(configured) == ApiKeyCredential(key="from-config")
        literal = provider(options={"apiKey": "literal"})
        assert await auth.credential_for(literal) == ApiKeyCredential(key="literal")

    async def test_nothing_configured(self):
        assert await Auth(env={}).credential_for(provider()) is None

    async def test_expired_oauth_is_refreshed_and_stored(self, tmp_path):
        store = CredentialStore(tmp_path)
        store.set("p", OAuthCredential(access="old", refresh="r1", expires_at=1000.0))
        calls = []

        async def refresh(cred: OAuthCredential) -> OAuthCredential:
            calls.append(cred.refresh)
            return OAuthCredential(access="new", refresh="r2", expires_at=5000.0)

        auth = Auth(env={}, store=store, refreshers={"p": refresh}, now=lambda: 990.0)
        assert (await auth.credential_for(provider())).access == "new"
        assert calls == ["r1"]
        assert store.get("p") == OAuthCredential(access="new", refresh="r2", expires_at=5000.0)
        fresh = Auth(env={}, store=store, refreshers={"p": refresh}, now=lambda: 1000.0)
        assert (await fresh.credential_for(provider())).access == "new"
        assert calls == ["r1"]


class TestStore:
    def test_file_is_private_and_round_trips(self, tmp_path):
        store = CredentialStore(tmp_path / "data")
        store.set("a", ApiKeyCredential(key="k"))
        store.set("b", OAuthCredential(access="t", refresh="r", expires_at=1.5, headers={"x": "y"}))
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        again = CredentialStore(tmp_path / "data")
        assert again.load() == {
            "a": ApiKeyCredential(key="k"),
            "b": OAuthCredential(access="t", refresh="r", expires_at=1.5, headers={"x": "y"}),
        }
        again.remove("a")
        assert set(store.load()) == {"b"}
        assert [p.name for p in (tmp_path / "data").iterdir()] == ["auth.json"]

    def test_corrupt_store_raises(self, tmp_path):
        (tmp_path / "auth.json").write_text('{"a": {"type": "weird"}}')
        with pytest.raises(AuthError, match="corrupt"):
            CredentialStore(tmp_path).load()
        (tmp_path / "auth.json").write_text("{not json")
        with pytest.raises(AuthError, match="corrupt credential store"):
            CredentialStore(tmp_path).load()


class TestCopilotDeviceFlow:
    async def test_polls_through_pending_and_slow_down(self, server, http):
        server.queue(
            Reply(
                json_body={
                    "device_code": "dc1",
                    "user_code": "ABCD-1234",
                    "verification_uri": "https://github.com/login/device",
                    "interval": 5,
                    "expires_in": 900,
                }
            ),
            Reply(json_body={"error": "authorization_pending"}),
            Reply(json_body={"error": "slow_down", "interval": 10}),
            Reply(
                json_body={
                    "access_token": "gho_token",
                    "token_type": "bearer",
                    "scope": "read:user",
                }
            ),
        )
        shown: list[DeviceCode] = []
        slept: list[float] = []

        async def show(code):
            shown.append(code)

        async def sleep(seconds):
            slept.append(seconds)
            await trio.lowlevel.checkpoint()

        cred = await copilot_device_login(
            http, on_user_code=show, max_wait=60, github_url=server.base_url, sleep=sleep
        )
        assert shown[0].user_code == "ABCD-1234"
        assert slept == [8.0, 13.0]
        assert cred.access == "gho_token" and cred.expires_at is None
        assert cred.base_url.startswith("https://copilot-api.")  # enterprise host: 127.0.0.1
        first, poll = server.requests[0], server.requests[1]
        assert (first.path, poll.path) == ("/login/device/code", "/login/oauth/access_token")
        assert first.json() == {"client_id": "Ov23li8tweQw6odWQebz", "scope": "read:user"}
        assert poll.json() == {
            "client_id": "Ov23li8tweQw6odWQebz",
            "device_code": "dc1",
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        }
        assert first.headers["accept"] == "application/json"

    async def test_denied_fails(self, server, http):
        server.queue(
            Reply(
                json_body={
                    "device_code": "dc",
                    "user_code": "U",
                    "verification_uri": "v",
                    "interval": 1,
                }
            ),
            Reply(json_body={"error": "access_denied"}),
        )

        async def show(code):
            pass

        with pytest.raises(AuthError, match="access_denied"):
            await copilot_device_login(
                http, on_user_code=show, max_wait=60, github_url=server.base_url
            )


class TestOpenAIPkce:
    def test_pkce_and_authorize_url(self):
        pkce = new_pkce(lambda n: bytes(range(n)))
        assert len(pkce.verifier) == 43
        digest = hashlib.sha256(pkce.verifier.encode()).digest()
        assert pkce.challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        url = urllib.parse.urlparse(openai_authorize_url(pkce, issuer="https://auth.example"))
        query = dict(urllib.parse.parse_qsl(url.query))
        assert url.path == "/oauth/authorize"
        assert query["code_challenge"] == pkce.challenge
        assert query["code_challenge_method"] == "S256"
        assert query["state"] == pkce.state
        assert query["redirect_uri"] == "http://localhost:1455/auth/callback"
        assert query["scope"] == "openid profile email offline_access"

    async def test_exchange_and_refresh_against_local_server(self, server, http):
        id_token = jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct_42"}})
        server.queue(
            Reply(
                json_body={
                    "id_token": id_token,
                    "access_token": "at1",
                    "refresh_token": "rt1",
                    "expires_in": 3600,
                }
            ),
            Reply(json_body={"access_token": "at2", "expires_in": 3600}),
        )
        pkce = new_pkce()
        cred = await openai_exchange_code(
            http, "code-xyz", pkce, state=pkce.state, issuer=server.base_url, now=lambda: 100.0
        )
        assert cred == OAuthCredential(
            access="at1",
            refresh="rt1",
            expires_at=3700.0,
            account_id="acct_42",
            base_url="https://chatgpt.com/backend-api/codex",
            headers={"originator": "kittiwake", "chatgpt-account-id": "acct_42"},
        )
        form = dict(urllib.parse.parse_qsl(server.requests[0].body.decode()))
        assert form == {
            "grant_type": "authorization_code",
            "code": "code-xyz",
            "redirect_uri": "http://localhost:1455/auth/callback",
            "client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
            "code_verifier": pkce.verifier,
        }
        refreshed = await openai_refresh(http, cred, issuer=server.base_url, now=lambda: 200.0)
        assert (refreshed.access, refreshed.refresh, refreshed.account_id) == (
            "at2",
            "rt1",
            "acct_42",
        )
        assert (
            dict(urllib.parse.parse_qsl(server.requests[1].body.decode()))["grant_type"]
            == "refresh_token"
        )

    async def test_state_mismatch_and_server_refusal(self, server, http):
        pkce = new_pkce()
        with pytest.raises(AuthError, match="state"):
            await openai_exchange_code(http, "c", pkce, state="forged", issuer=server.base_url)
        server.queue(Reply(status=400, json_body={"error": "invalid_grant"}))
        with pytest.raises(AuthError, match="HTTP 400"):
            await openai_exchange_code(http, "c", pkce, state=pkce.state, issuer=server.base_url)

    def test_account_id_claims(self):
        assert jwt_account_id(jwt({"chatgpt_account_id": "a"})) == "a"
        assert jwt_account_id(jwt({"organizations": [{"id": "org_1"}]})) == "org_1"
        assert jwt_account_id("not-a-jwt") is None
