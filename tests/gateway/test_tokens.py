"""Bearer tokens on a served runtime: roles on HTTP, SSE and the websocket,
revocation and expiry closing open streams, hashed storage, slowed failures per address,
per-token admission rates, and the audit of it all."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from trio_websocket import (
    ConnectionClosed,
    open_websocket_url,
    wrap_client_stream,
)

from gateway import AccessLimits
from gateway.http._app import gateway_of
from storage import GetRecord, ListRecords

from .conftest import served

PW = ("kittiwake", "pw")
pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def create(client: httpx.AsyncClient, role: str, **body: str) -> tuple[str, str]:
    r = await client.post(
        "/api/token", json={"user": f"u-{role}", "project": "*", "role": role, **body}, auth=PW
    )
    assert r.status_code == 201, r.text
    data = r.json()["data"]
    return data["token"], data["info"]["id"]


async def stream_ends(client: httpx.AsyncClient, token: str, opened: trio.Event) -> None:
    """Read ``/api/event`` with *token* until the server ends it."""
    async with client.stream("GET", "/api/event", headers=bearer(token)) as r:
        assert r.status_code == 200
        opened.set()
        async for _ in r.aiter_bytes():
            pass


async def test_roles_revocation_hashing_and_audit(tmp_path):
    async with served(tmp_path, password="pw", tokens=True) as g:
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            r = await client.get("/api/session")
            assert r.status_code == 401 and r.json()["_tag"] == "UnauthorizedError"
            read, read_id = await create(client, "read")
            write, _ = await create(client, "write")
            admin, admin_id = await create(client, "admin")

            # Stored hashed: the record holds an scrypt hash, never the secret.
            row = await g.rt.storage.read(GetRecord(kind="token", id=read_id))
            stored = json.loads(row.data)
            assert stored["hash"].startswith("scrypt$") and read.split("_", 2)[2] not in row.data

            listed = (await client.get("/api/token", headers=bearer(admin))).json()["data"]
            assert {t["role"] for t in listed} == {"read", "write", "admin"}
            assert all("hash" not in t for t in listed)

            # read: lists and streams, cannot prompt (the per-prompt routes included).
            assert (await client.get("/api/session", headers=bearer(read))).status_code == 200
            r = await client.post("/api/session", json={}, headers=bearer(read))
            assert r.status_code == 403 and r.json()["_tag"] == "ForbiddenError"
            r = await client.post("/api/session", json={}, headers=bearer(write))
            assert r.status_code == 200
            sid = r.json()["data"]["id"]
            prompt = {"prompt": {"text": "hi"}}
            r = await client.post(f"/api/session/{sid}/prompt", json=prompt, headers=bearer(read))
            assert r.status_code == 403 and r.json()["_tag"] == "ForbiddenError"
            r = await client.post(f"/api/session/{sid}/prompt", json=prompt, headers=bearer(write))
            assert r.status_code == 200
            # write: no configuration, no tokens.
            r = await client.patch("/config", json={}, headers=bearer(write))
            assert r.status_code == 403
            assert (await client.get("/api/token", headers=bearer(write))).status_code == 403

            # The websocket: a read token subscribes but cannot prompt.
            ws_url = g.url.replace("http://", "ws://") + "/api/ws"
            headers = [("Authorization", f"Bearer {read}")]
            async with open_websocket_url(ws_url, extra_headers=headers) as ws:
                await ws.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
                frames = [json.loads(await ws.get_message())]
                while frames[-1].get("type") != "reply":
                    frames.append(json.loads(await ws.get_message()))
                assert "error" not in frames[-1]
                frame = {"type": "prompt", "ref": 2, "sessionID": sid, "prompt": {"text": "x"}}
                await ws.send_message(json.dumps(frame))
                while (reply := json.loads(await ws.get_message())).get("ref") != 2:
                    pass
                assert reply["error"]["_tag"] == "ForbiddenError"

            # A revocation closes the token's open streams and refuses it at once.
            async def socket_closes(opened: trio.Event) -> None:
                host, port = g.url.removeprefix("http://").split(":")
                stream = await trio.open_tcp_stream(host, int(port))
                try:  # closed by hand: trio-websocket leaves it open after a server's close
                    async with trio.open_nursery() as inner:
                        ws = await wrap_client_stream(
                            inner, stream, host, "/api/ws", extra_headers=headers
                        )
                        opened.set()
                        with pytest.raises(ConnectionClosed):
                            while True:
                                await ws.get_message()
                finally:
                    await stream.aclose()

            opened, socket_opened = trio.Event(), trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream_ends, client, read, opened)
                nursery.start_soon(socket_closes, socket_opened)
                await opened.wait()
                await socket_opened.wait()
                r = await client.delete(f"/api/token/{read_id}", headers=bearer(admin))
                assert r.status_code == 200 and r.json()["data"]["timeRevoked"] is not None
            assert (await client.get("/api/session", headers=bearer(read))).status_code == 401
            r = await client.delete("/api/token/nope", headers=bearer(admin))
            assert r.status_code == 404

            audit = (await client.get("/api/audit", headers=bearer(admin))).json()["data"]
            actions = [(a["action"], a["status"], a["user"]) for a in audit]
            assert ("POST /api/token", 201, "password") in actions
            assert ("POST /api/session", 403, "u-read") in actions
            assert (f"POST /api/session/{sid}/prompt", 403, "u-read") in actions
            assert ("PATCH /config", 403, "u-write") in actions
            assert ("WEBSOCKET prompt", 403, "u-read") in actions
            assert (f"DELETE /api/token/{read_id}", 200, "u-admin") in actions
            assert ("GET /api/session", 401, None) in actions
            assert all(a["address"] == "127.0.0.1" for a in audit)
            stored_audit = await g.rt.storage.read(ListRecords(kind="audit", limit=1000))
            assert len(stored_audit) == len(audit)  # reading it is no admin action
            assert json.loads(stored_audit[0].data)["tokenID"] == admin_id


async def test_an_expired_token_is_refused_and_its_stream_closed(tmp_path):
    limits = AccessLimits(recheck=0.1)
    async with served(tmp_path, tokens=True, access_limits=limits) as g:
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            assert (await client.get("/api/session")).status_code == 401
            # Without a password the server holds no admin: the first token is made here.
            token, record = await gateway_of(g.server.app).access.create_token(
                user="eve", project="*", role="read", expires_in=1
            )
            assert (await client.get("/api/session", headers=bearer(token))).status_code == 200
            opened = trio.Event()
            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stream_ends, client, token, opened)
                    await opened.wait()
            r = await client.get("/api/session", headers=bearer(token))
            assert r.status_code == 401 and record.time_expires is not None


async def test_failures_slow_their_address_only_and_changes_are_rate_limited(tmp_path):
    limits = AccessLimits(admission_burst=3, admissions_per_second=0.01, first_delay=30)
    async with served(tmp_path, password="pw", tokens=True, access_limits=limits) as g:
        other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with (
            httpx.AsyncClient(base_url=g.url, timeout=30) as client,
            httpx.AsyncClient(base_url=g.url, timeout=30, transport=other) as elsewhere,
        ):
            token, _ = await create(client, "write")
            known, _ = await create(client, "read")
            assert (await client.get("/api/session", headers=bearer(known))).status_code == 200
            for _ in range(8):  # no credentials at all is no guess: never held off for it
                assert (await client.get("/api/session")).status_code == 401
            wrong = token[:-4] + "AAAA"
            statuses = [
                (await client.get("/api/session", headers=bearer(wrong))).status_code
                for _ in range(20)
            ]
            assert statuses == [401] * 6 + [429] * 14
            # Held off: no password or new token is checked from there; one this process
            # verified before still works, and other addresses are not slowed.
            for held in ({"Authorization": f"Bearer {token}"}, {"Authorization": "Basic a3c6cHc="}):
                r = await client.get("/api/session", headers=held)
                assert r.status_code == 429 and r.json()["_tag"] == "TooManyRequestsError"
            assert "127.0.0.1" in r.json()["message"] and int(r.headers["Retry-After"]) >= 1
            assert (await client.get("/api/session", headers=bearer(known))).status_code == 200
            r = await elsewhere.get("/api/session", headers=bearer(token))
            assert r.status_code == 200
            audit = await g.rt.storage.read(ListRecords(kind="audit", limit=1000))
            held_off = [a for a in audit if '"status":429' in a.data]
            assert len(held_off) == 1  # one record per hold, not one per request

            created = [
                (await elsewhere.post("/api/session", json={}, headers=bearer(token))).status_code
                for _ in range(4)
            ]
            assert created == [200, 200, 200, 429]
            r = await elsewhere.post("/api/session", json={}, headers=bearer(token))
            assert r.json()["_tag"] == "RateLimitedError"
            assert r.json()["message"].startswith("Token ")


async def test_a_token_of_another_project_finds_nothing_of_this_one(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    async with served(tmp_path, password="pw", tokens=True) as g:
        project = await g.rt.projects.id_of(str(tmp_path))
        async with httpx.AsyncClient(base_url=g.url, timeout=30) as client:
            sid = (await client.post("/api/session", json={}, auth=PW)).json()["data"]["id"]
            missing = (await client.get("/api/session/ses_missing", auth=PW)).json()
            ours, _ = await create(client, "write", project=project)
            theirs, _ = await create(client, "write", project="prj_other")
            # Every way to this project's session answers as if it did not exist.
            r = await client.get(f"/api/session/{sid}", headers=bearer(theirs))
            assert r.status_code == 404
            assert r.json() == {k: str(v).replace("ses_missing", sid) for k, v in missing.items()}
            refused = [
                ("GET", f"/api/session/{sid}/event", None),
                ("POST", f"/api/session/{sid}/prompt", {"prompt": {"text": "hi"}}),
                ("GET", f"/session/{sid}", None),
                ("POST", f"/session/{sid}/shell", {"agent": "build", "command": "ls"}),
                ("GET", f"/project/{project}/session", None),
                ("GET", "/file", {"path": "."}),
                ("GET", "/file/content", {"path": "a.txt"}),
            ]
            for method, path, body in refused:
                if method == "GET":
                    r = await client.get(path, params=body, headers=bearer(theirs))
                else:
                    r = await client.post(path, json=body, headers=bearer(theirs))
                assert r.status_code == 404, (path, r.text)
            # The lists and the websocket of every project show it nothing of this one.
            r = await client.get("/api/session", headers=bearer(theirs))
            assert r.status_code == 200 and r.json()["data"] == []
            assert (await client.get("/session", headers=bearer(theirs))).json() == []
            ws_url = g.url.replace("http://", "ws://") + "/api/ws"
            headers = [("Authorization", f"Bearer {theirs}")]
            async with open_websocket_url(ws_url, extra_headers=headers) as ws:
                frame = {"type": "subscribe", "ref": 1, "sessionID": sid}
                await ws.send_message(json.dumps(frame))
                with trio.fail_after(10):
                    while (reply := json.loads(await ws.get_message())).get("ref") != 1:
                        pass
                assert reply["error"]["_tag"] == "SessionNotFoundError", reply
            # The token of this project sees them.
            assert (
                await client.get(f"/api/session/{sid}", headers=bearer(ours))
            ).status_code == 200
            r = await client.get("/file/content", params={"path": "a.txt"}, headers=bearer(ours))
            assert r.status_code == 200
            r = await client.get("/api/session", headers=bearer(ours))
            assert [s["id"] for s in r.json()["data"]] == [sid]
