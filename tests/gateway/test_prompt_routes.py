"""The routes a client sends per prompt (health, prompt, wait): their answers and guards,
whichever way the body is framed (``content-length`` or chunked: the same request is sent
both ways and the answers compared), a client leaving a wait, and the gateway's bound on the
sessions it remembers."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from gateway import create_app
from runtime import Location, SessionNotFoundError
from runtime.llm import LLMEvent, LLMRequest
from storage import GetSession

from .conftest import answer, served


async def chunked(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def both(client: httpx.AsyncClient, path: str, data: bytes) -> list[httpx.Response]:
    """POST *data* once with ``content-length`` and once chunked."""
    sized = await client.post(path, content=data)
    chunked_ = await client.post(path, content=chunked(data))
    assert "content-length" in sized.request.headers
    assert "content-length" not in chunked_.request.headers
    return [sized, chunked_]


async def test_both_framings_get_the_same_answers(tmp_path):
    # 30 s, not httpx's default 5 s: on a loaded machine the first write (or the 900 KB
    # bodies below) may take longer than 5 s, and this test is about answers, not speed
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url, timeout=30) as client:
        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
        health = await client.get("/api/health")
        assert (health.status_code, health.json()) == (200, {"healthy": True})
        assert health.headers["content-type"] == "application/json"

        cases = [
            (f"/api/session/{sid}/prompt", b'{"prompt":{}}', 400),
            (f"/api/session/{sid}/prompt", b"{bad", 400),
            (f"/api/session/{sid}/prompt", b"", 400),
            (f"/api/session/{sid}/prompt", b'{"prompt":{"text":"hi"},"x":1}', 400),
            ("/api/session/ses_nope/prompt", b'{"prompt":{"text":"hi"}}', 404),
            ("/api/session/not-an-id/prompt", b'{"prompt":{"text":"hi"}}', 400),
            ("/api/session/ses_nope/wait", b"", 404),
        ]
        for path, data, status in cases:
            sized, chunked_ = await both(client, path, data)
            assert sized.status_code == chunked_.status_code == status, (path, data)
            assert sized.json() == chunked_.json(), (path, data)
            assert sized.headers["content-type"] == chunked_.headers["content-type"]

        for _ in range(3):  # a body nobody needs is still read: the connection stays usable
            with_body = await client.request("GET", "/api/health", content=b"x" * 900_000)
            assert with_body.status_code == 200

        # not woken, so never promoted: the retry's stored receipt gains no promotedSeq
        exact = b'{"id":"msg_01HZXJ5Q7Y0000000000000000","prompt":{"text":"hi"},"resume":false}'
        sized, chunked_ = await both(client, f"/api/session/{sid}/prompt", exact)
        assert sized.status_code == chunked_.status_code == 200
        assert sized.json() == chunked_.json()  # an exact retry returns the stored receipt
        wake = exact.replace(b'"resume":false', b'"resume":true')
        woken = await client.post(f"/api/session/{sid}/prompt", content=wake)
        assert woken.json() == sized.json()  # a retry may wake the session (resume: true)
        for _ in range(2):
            sized, chunked_ = await both(client, f"/api/session/{sid}/wait", b"")
            assert sized.status_code == chunked_.status_code == 204
            assert sized.content == chunked_.content == b""
        messages = (await client.get(f"/api/session/{sid}/message")).json()["data"]
        assert [m["type"] for m in messages] == ["assistant", "user"]


async def test_the_guards_answer_both_framings_alike(tmp_path):
    options = {"password": "s3cret", "cors_origins": ["http://app.example"], "max_body": 64}
    async with served(tmp_path, **options) as g, httpx.AsyncClient(base_url=g.url) as client:
        token = base64.b64encode(b"kittiwake:s3cret").decode()
        auth = {"Authorization": f"Basic {token}"}
        refused = await client.get("/api/health")
        assert refused.status_code == 401
        assert refused.json()["_tag"] == "UnauthorizedError"
        assert refused.headers["www-authenticate"].startswith("Basic")
        wrong = await client.get("/api/health", headers={"Authorization": "Basic eDp5"})
        assert wrong.status_code == 401

        origin = {"Origin": "http://app.example"}
        health = await client.get("/api/health", headers={**auth, **origin})
        assert health.status_code == 200
        assert health.headers["access-control-allow-origin"] == "http://app.example"
        assert health.headers["vary"] == "Origin"
        other = await client.get("/api/health", headers={**auth, "Origin": "http://evil"})
        assert "access-control-allow-origin" not in other.headers

        sid = (await client.post("/api/session", json={}, headers=auth)).json()["data"]["id"]
        path = f"/api/session/{sid}/prompt"
        too_large = b'{"prompt":{"text":"' + b"x" * 100 + b'"}}'
        sized = await client.post(path, content=too_large, headers={**auth, **origin})
        chunked_ = await client.post(path, content=chunked(too_large), headers={**auth, **origin})
        assert sized.status_code == chunked_.status_code == 413
        assert sized.json() == chunked_.json()
        assert sized.json()["_tag"] == "PayloadTooLargeError"
        bad = await client.post(path, content=b"{bad", headers={**auth, **origin})
        assert bad.status_code == 400
        assert bad.headers["access-control-allow-origin"] == "http://app.example"
        waited = await client.post(f"/api/session/{sid}/wait", headers={**auth, **origin})
        assert waited.status_code == 204
        assert waited.headers["access-control-allow-origin"] == "http://app.example"
        unauthorized = await client.post(f"/api/session/{sid}/wait")
        assert unauthorized.status_code == 401


class GatedLLM:
    """Answers once *gate* is set, so a turn stays busy as long as the test needs."""

    def __init__(self) -> None:
        self.gate = trio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[LLMEvent]:
        await self.gate.wait()
        for event in answer("late"):
            yield event


async def test_a_client_leaving_a_wait_leaves_the_server_serving(tmp_path):
    llm = GatedLLM()
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
        await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}})
        with trio.CancelScope() as waiting:

            async def leave_once_held() -> None:
                await trio.testing.wait_all_tasks_blocked()  # the server holds the wait
                waiting.cancel()

            async with trio.open_nursery() as nursery, httpx.AsyncClient(base_url=g.url) as leaving:
                nursery.start_soon(leave_once_held)
                await leaving.post(f"/api/session/{sid}/wait")
        assert waiting.cancelled_caught  # the turn was still waiting for the provider
        assert (await client.get("/api/health")).status_code == 200
        llm.gate.set()
        assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
        messages = (await client.get(f"/api/session/{sid}/message")).json()["data"]
        assert messages[0]["content"][0]["text"] == "late"


async def test_known_sessions_are_bounded(tmp_path):
    async with served(tmp_path) as g:
        app = create_app(g.rt, known_sessions=2)
        gw = app.extensions["kittiwake"]
        where = Location(directory=str(tmp_path))
        ids = [(await g.rt.sessions.create(location=where)).id for _ in range(4)]
        for sid in ids[:3]:
            await gw.check_session(sid)  # remembers the last two: 1, 2
        await gw.check_session(ids[1])  # 1 is now the most recently seen
        for sid in ids[:3]:  # deleted behind the gateway's back: only a lookup notices
            await g.rt.sessions.delete(sid)
        await gw.check_session(ids[3])  # pushes out the least recently seen, 2
        await gw.check_session(ids[1])  # remembered: not looked up again
        for forgotten in (ids[0], ids[2]):
            with pytest.raises(SessionNotFoundError):
                await gw.check_session(forgotten)


def count_session_reads(rt: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the sessions the store is asked for (``GetSession``) from now on: the
    runtime's own store, its ``read`` counted on the way."""
    asked: list[str] = []
    read = rt.storage.read

    async def counted(query: Any) -> Any:
        if isinstance(query, GetSession):
            asked.append(query.session_id)
        return await read(query)

    monkeypatch.setattr(rt.storage, "read", counted)
    return asked


async def test_a_new_sessions_first_prompt_reads_no_session(tmp_path, monkeypatch):
    """A session created here and unchanged since is known: its first prompt (revert check,
    activation, the wait's existence check) reads nothing of it; one changed since is
    read again, and its changed info is what its turn runs with."""
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url, timeout=30) as client:
        asked = count_session_reads(g.rt, monkeypatch)
        sid = (await client.post("/api/session", json={})).json()["data"]["id"]
        await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "hi"}})
        assert (await client.post(f"/api/session/{sid}/wait")).status_code == 204
        assert asked == []
        messages = (await client.get(f"/api/session/{sid}/message")).json()["data"]
        assert [m["type"] for m in messages] == ["assistant", "user"]

        other = (await client.post("/api/session", json={})).json()["data"]["id"]
        switched = await client.post(f"/api/session/{other}/agent", json={"agent": "plan"})
        assert switched.status_code == 204
        del asked[:]
        await client.post(f"/api/session/{other}/prompt", json={"prompt": {"text": "hi"}})
        assert (await client.post(f"/api/session/{other}/wait")).status_code == 204
        assert other in asked  # changed since its creation: read again
        replies = (await client.get(f"/api/session/{other}/message")).json()["data"]
        assert [(m["type"], m.get("agent")) for m in replies[:2]] == [
            ("assistant", "plan"), ("user", None),
        ]  # fmt: skip

        third = (await client.post("/api/session", json={})).json()["data"]["id"]
        del asked[:]
        assert (await g.rt.sessions.get(third)).title != "named"
        assert asked == []
        await g.rt.sessions.rename(third, "named")
        assert (await g.rt.sessions.get(third)).title == "named"
        assert asked == [third]
