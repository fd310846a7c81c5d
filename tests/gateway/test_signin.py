"""A browser's sign-in with a bearer token (``POST /api/signin``): the cookie it answers,
which the gate admits as the token (role, project, revocation) on HTTP and the websocket,
its refusals, their audit and rate limit, and ``POST /api/signout``."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from trio_websocket import ConnectionRejected, open_websocket_url, wrap_client_stream

from gateway import AccessLimits
from gateway.http._app import gateway_of
from storage import GetRecord, ListRecords

from .conftest import served

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
]
COOKIE = "kittiwake_signin"


async def test_signin_cookie_stands_for_its_token_until_signout_or_revocation(tmp_path):
    async with served(tmp_path, tokens=True, access_limits=AccessLimits(recheck=0.1)) as g:
        access = gateway_of(g.server.app).access
        token, record = await access.create_token(
            user="ann", project="*", role="read", expires_in=3600
        )
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            # The page itself is open on a token server (it shows the sign-in form); the
            # API is not, and its 401 asks for a bearer token only (no browser prompt).
            assert (await client.get("/")).status_code == 200
            r = await client.get("/api/session")
            assert (
                r.status_code == 401 and r.headers["WWW-Authenticate"] == 'Bearer realm="kittiwake"'
            )

            r = await client.post("/api/signin", json={"token": token})
            assert r.status_code == 200, r.text
            assert r.json()["data"] == {
                "user": "ann", "project": "*", "role": "read", "expiresIn": r.json()["data"]["expiresIn"]
            }  # fmt: skip
            assert 3590 <= r.json()["data"]["expiresIn"] <= 3600  # no later than the token
            set_cookie = r.headers["Set-Cookie"]
            value = set_cookie.split(";")[0].split("=", 1)[1]
            attributes = {a.strip() for a in set_cookie.split(";")[1:]}
            assert {"Path=/", "HttpOnly", "SameSite=Strict"} <= attributes
            assert "Secure" not in attributes  # served over plain HTTP here
            max_age = int(next(a for a in attributes if a.startswith("Max-Age="))[8:])
            assert 3590 <= max_age <= 3600
            # The store keeps the cookie's hash, never the cookie or the token.
            rows = await g.rt.storage.read(ListRecords(kind="signin", limit=10))
            assert len(rows) == 1 and value not in rows[0].data and token not in rows[0].data
            assert json.loads(rows[0].data)["tokenId"] == record.id

            client.cookies.clear()  # sent by hand below
            jar = {"Cookie": f"{COOKIE}={value}"}
            r = await client.get("/api/session", headers=jar)
            assert r.status_code == 200, (r.text, r.request.headers)
            r = await client.get("/api/signin", headers=jar)
            assert r.json()["data"] == {
                "user": "ann",
                "project": "*",
                "role": "read",
                "signedIn": True,
            }
            r = await client.get("/api/signin", headers={"Authorization": f"Bearer {token}"})
            assert r.json()["data"]["signedIn"] is False
            r = await client.post("/api/session", json={}, headers=jar)  # a read token's
            assert r.status_code == 403 and r.json()["_tag"] == "ForbiddenError"
            ws = g.url.replace("http", "ws") + "/api/ws"
            async with open_websocket_url(
                ws, extra_headers=[(b"Cookie", f"{COOKIE}={value}".encode())]
            ):
                pass
            # A forged cookie is refused (and cleared).
            r = await client.get("/api/session", headers={"Cookie": f"{COOKIE}=kws_" + "A" * 43})
            assert r.status_code == 401 and r.json()["_tag"] == "UnauthorizedError"
            assert "Max-Age=0" in r.headers["Set-Cookie"]

            # Signed out: the cookie is refused at once.
            r = await client.post("/api/signout", headers=jar)
            assert r.status_code == 204 and "Max-Age=0" in r.headers["Set-Cookie"]
            assert (await client.get("/api/session", headers=jar)).status_code == 401
            row = await g.rt.storage.read(GetRecord(kind="signin", id=rows[0].id))
            assert json.loads(row.data)["timeEnded"] is not None

            # Revoked: a new sign-in's cookie is refused at once, on HTTP and the websocket.
            r = await client.post("/api/signin", json={"token": token})
            jar = {"Cookie": f"{COOKIE}={r.cookies[COOKIE]}"}
            client.cookies.clear()
            r = await client.get("/api/session", headers=jar)
            assert r.status_code == 200, (r.text, r.request.headers)
            await access.revoke(record.id)
            r = await client.get("/api/session", headers=jar)
            assert r.status_code == 401 and r.json()["_tag"] == "UnauthorizedError"
            host, port = g.url.removeprefix("http://").split(":")
            stream = await trio.open_tcp_stream(host, int(port))
            rejected: ConnectionRejected | None = None
            try:  # closed by hand: trio-websocket leaves a refused connection open
                async with trio.open_nursery() as nursery:
                    await wrap_client_stream(
                        nursery, stream, host, "/api/ws", extra_headers=[("Cookie", jar["Cookie"])]
                    )
            except* ConnectionRejected as group:
                rejected = group.exceptions[0]  # type: ignore[assignment]
            finally:
                await stream.aclose()
            assert rejected is not None and rejected.status_code == 401
            r = await client.post("/api/signin", json={"token": token})
            assert r.status_code == 401 and r.json()["_tag"] == "UnauthorizedError"


async def test_failed_signins_are_audited_and_slow_their_address(tmp_path):
    limits = AccessLimits(first_delay=30)
    async with served(tmp_path, tokens=True, access_limits=limits) as g:
        access = gateway_of(g.server.app).access
        token, record = await access.create_token(
            user="bob", project="*", role="write", expires_in=None
        )
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            r = await client.post("/api/signin", json={"token": "nonsense"})
            assert r.status_code == 401 and set(r.json()) == {"_tag", "message"}
            assert r.json()["_tag"] == "UnauthorizedError" and "Set-Cookie" not in r.headers
            r = await client.post("/api/signin", json={"token": 3})
            assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
            wrong = token[:-4] + "AAAA"
            statuses = [
                (await client.post("/api/signin", json={"token": wrong})).status_code
                for _ in range(6)
            ]
            assert statuses == [401] * 5 + [429]  # 5 failures are free, the 6th holds it off
            r = await client.post("/api/signin", json={"token": token})  # never verified here
            assert r.status_code == 429 and r.json()["_tag"] == "TooManyRequestsError"
            audit = [
                json.loads(a.data)
                for a in await g.rt.storage.read(ListRecords(kind="audit", limit=100))
            ]
            signins = [
                (a["status"], a["message"]) for a in audit if a["action"] == "POST /api/signin"
            ]
            assert signins.count((401, "sign-in failed")) == 6
            assert (429, "held off") in signins

        other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with httpx.AsyncClient(base_url=g.url, timeout=30, transport=other) as elsewhere:
            r = await elsewhere.post("/api/signin", json={"token": token})
            assert r.status_code == 200
            audit = [
                json.loads(a.data)
                for a in await g.rt.storage.read(ListRecords(kind="audit", limit=100))
            ]
            ok = [a for a in audit if a["message"] == "signed in"]
            assert [(a["status"], a["tokenID"], a["address"]) for a in ok] == [
                (200, record.id, "127.0.0.2")
            ]


async def test_a_password_server_has_no_signin_and_keeps_its_page_closed(tmp_path):
    async with served(tmp_path, password="pw") as g:
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            r = await client.get("/")
            assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Basic")
            r = await client.post("/api/signin", json={"token": "kwt_x"})
            assert r.status_code == 404 and r.json()["_tag"] == "NotFoundError"
            assert (await client.get("/", auth=("me", "pw"))).status_code == 200
