"""Websocket and SSE streams: replay then tail, resumption, slow clients, auth."""

from __future__ import annotations

import base64
import json
import socket

import httpx
import pytest
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    open_websocket_url,
    wrap_client_stream,
)

from gateway import WebsocketLimits
from gateway.http._app import gateway_of
from runtime.llm import ScriptedLLM
from tests.waiting import eventually

from .conftest import answer, assert_valid, component, served

S = "/api/session"
# httpx's streaming iterators are nested async generators; leaving a stream early lets the
# inner ones be collected unexhausted, which trio reports. The streams themselves are closed.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.*:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.*:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object Response.aiter"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object "
        "(HTTP11ConnectionByteStream|PoolByteStream|AsyncHTTP11Connection)"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/api/ws"


async def durable_seqs(rt, sid: str) -> list[int]:
    """The seqs of the session's durable events stored so far, read page by page."""
    seqs: list[int] = []
    more = True
    while more:
        page, more = await rt.sessions.history(sid, after=seqs[-1] if seqs else None, limit=1000)
        seqs += [item.seq for item in page]
        more = more and bool(page)
    return seqs


async def recv(ws) -> dict:
    with trio.fail_after(10):
        return json.loads(await ws.get_message())


async def test_websocket_resume_sees_every_durable_event_once(tmp_path):
    llm = ScriptedLLM(lambda r: answer("a fairly long answer, chunked", chunks=8), latency=0.01)
    async with served(tmp_path, llm=llm) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = (await client.post(S, json={})).json()["data"]["id"]
        seen: list[int] = []
        deltas = 0
        async with open_websocket_url(ws_url(g.url)) as ws:
            await ws.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
            assert (await recv(ws)) == {"type": "reply", "ref": 1, "data": None}
            for n in range(3):
                frame = {"type": "prompt", "ref": f"p{n}", "sessionID": sid,
                         "prompt": {"text": f"q{n}"}, "delivery": "queue"}  # fmt: skip
                await ws.send_message(json.dumps(frame))
            while len(seen) < 6:
                msg = await recv(ws)
                if msg["type"] == "event":
                    assert msg["sessionID"] == sid
                    assert_valid(msg["event"]["durable"], {"type": "object"})
                    seen.append(msg["seq"])
                elif msg["type"] == "reply":
                    assert msg["data"]["sessionID"] == sid
        # disconnected mid-stream; the session keeps running
        await client.post(f"{S}/{sid}/wait")
        expected = await durable_seqs(g.rt, sid)
        assert len(expected) > len(seen)
        async with open_websocket_url(ws_url(g.url)) as ws:
            sub = {"type": "subscribe", "ref": 2, "sessionID": sid, "after": seen[-1]}
            await ws.send_message(json.dumps(sub))
            while seen[-1] != expected[-1]:
                msg = await recv(ws)
                if msg["type"] == "event":
                    seen.append(msg["seq"])
                elif msg["type"] == "delta":
                    deltas += 1
        assert seen == expected
        assert len(set(seen)) == len(seen)


async def test_websocket_live_deltas_and_errors(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = (await client.post(S, json={})).json()["data"]["id"]
        async with open_websocket_url(ws_url(g.url)) as ws:
            await ws.send_message(json.dumps({"type": "subscribe", "ref": "s", "sessionID": sid}))
            assert (await recv(ws))["ref"] == "s"
            await ws.send_message(json.dumps({"type": "prompt", "ref": "p", "sessionID": sid,
                                              "prompt": {"text": "hi"}}))  # fmt: skip
            kinds = []
            while "session.next.step.ended" not in kinds:
                msg = await recv(ws)
                if msg["type"] == "delta":
                    assert msg["type"] == "delta" and "seq" not in msg
                    assert msg["event"]["type"] == "session.next.text.delta"
                    kinds.append("delta")
                elif msg["type"] == "event":
                    kinds.append(msg["event"]["type"])
            assert "delta" in kinds
            assert kinds.index("session.next.text.ended") < kinds.index("session.next.step.ended")

            missing = "ses_" + "0" * 26
            await ws.send_message(json.dumps({"type": "subscribe", "ref": 9, "sessionID": missing}))
            msg = await recv(ws)
            assert msg["ref"] == 9 and msg["error"]["_tag"] == "SessionNotFoundError"
            await ws.send_message("not json")
            msg = await recv(ws)
            assert msg["error"]["_tag"] == "InvalidRequestError"
            await ws.send_message(json.dumps({"type": "prompt", "ref": 3, "sessionID": sid}))
            msg = await recv(ws)
            assert msg["ref"] == 3 and msg["error"]["_tag"] == "InvalidRequestError"


async def small_window_websocket(nursery, url: str):
    """A client whose socket takes little before TCP pushes back on the server."""
    host, port = url.removeprefix("http://").split(":")
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect((host, int(port)))
    stream = trio.SocketStream(sock)
    ws = await wrap_client_stream(
        nursery, stream, host, "/api/ws", message_queue_size=1, max_message_size=2**24
    )
    return ws, stream


async def test_slow_websocket_client_is_cut_off_without_slowing_others(tmp_path, caplog):
    big = "x" * 200_000
    script = [
        answer(big, chunks=1)[:1]
        + [e for i in range(40) for e in answer(big + str(i), chunks=1)[1:4]]
        + answer("", chunks=1)[4:]
    ]
    llm = ScriptedLLM(script)
    limits = WebsocketLimits(max_pending=4, stall_timeout=0.5, close_timeout=10.0)
    async with (
        served(tmp_path, llm=llm, ws_limits=limits) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        sid = (await client.post(S, json={})).json()["data"]["id"]
        async with trio.open_nursery() as nursery, \
                open_websocket_url(ws_url(g.url), max_message_size=2**24) as fast:  # fmt: skip
            slow, slow_stream = await small_window_websocket(nursery, g.url)
            await slow.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
            await fast.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
            assert (await recv(fast))["ref"] == 1
            started = trio.current_time()
            await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "go"}})
            ended = False
            while not ended:
                msg = await recv(fast)
                ended = msg["type"] == "event" and msg["event"]["type"] == "session.next.step.ended"
            assert trio.current_time() - started < 8
            # the slow client has not read; once the server has cut it off for stalling it
            # drains what was already on its way and finds the 1013 close
            await eventually(lambda: any("too slow" in r.getMessage() for r in caplog.records))
            with trio.fail_after(10), pytest.raises(ConnectionClosed) as closed:
                while True:
                    await slow.get_message()
            assert closed.value.reason.code == 1013
            await slow_stream.aclose()


async def test_session_sse_replays_then_tails(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url, timeout=10) as client:
        sid = (await client.post(S, json={})).json()["data"]["id"]
        await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "one"}})
        await client.post(f"{S}/{sid}/wait")
        expected_first = await durable_seqs(g.rt, sid)
        seqs: list[int] = []
        async with client.stream(
            "GET", f"{S}/{sid}/event", params={"after": expected_first[1]}
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.aiter_lines()
            frame: dict[str, str] = {}
            prompted = False
            while True:
                line = await anext(lines)
                if line:
                    key, _, value = line.partition(": ")
                    frame[key] = value
                    continue
                data = json.loads(frame["data"])
                assert int(frame["id"]) == data["durable"]["seq"]
                assert frame["event"] == data["type"]
                assert data["id"].startswith("evt")
                seqs.append(data["durable"]["seq"])
                frame = {}
                if seqs[-1] == expected_first[-1] and not prompted:
                    prompted = True
                    await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "two"}})
                if (
                    prompted
                    and data["type"] == "session.next.step.ended"
                    and seqs[-1] > expected_first[-1]
                ):
                    break
        assert seqs[0] == expected_first[2]
        assert seqs == sorted(set(seqs))
        assert seqs[-1] > expected_first[-1]


async def test_global_event_stream_connects_and_beats(tmp_path):
    async with (
        served(tmp_path, heartbeat=0.2) as g,
        httpx.AsyncClient(base_url=g.url, timeout=10) as client,
    ):
        sid = (await client.post(S, json={})).json()["data"]["id"]
        types: list[str] = []
        async with client.stream("GET", "/api/event") as r:
            lines = r.aiter_lines()
            while "server.heartbeat" not in types or "session.next.step.ended" not in types:
                line = await anext(lines)
                if line.startswith("data: "):
                    types.append(json.loads(line[6:])["type"])
                    if types == ["server.connected"]:
                        await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "x"}})
        assert types[0] == "server.connected"
        assert "session.next.text.delta" in types


async def test_basic_auth_guards_http_and_websocket(tmp_path):
    async with served(tmp_path, password="s3cret") as g:
        async with httpx.AsyncClient(base_url=g.url) as client:
            r = await client.get("/api/health")
            assert r.status_code == 401
            assert_valid(r.json(), component("UnauthorizedError"))
            r = await client.get("/api/health", auth=("kittiwake", "wrong"))
            assert r.status_code == 401
            r = await client.get("/api/health", auth=("kittiwake", "s3cret"))
            assert r.status_code == 200
        host, port = g.url.removeprefix("http://").split(":")
        for header in ([], [("Authorization", "Basic " + base64.b64encode(b"u:nope").decode())]):
            stream = await trio.open_tcp_stream(host, int(port))
            rejected: ConnectionRejected | None = None
            try:
                async with trio.open_nursery() as nursery:
                    await wrap_client_stream(nursery, stream, host, "/api/ws", extra_headers=header)
            except* ConnectionRejected as group:
                rejected = group.exceptions[0]  # type: ignore[assignment]
            finally:
                await stream.aclose()
            assert rejected is not None and rejected.status_code == 401
            assert json.loads(rejected.body)["_tag"] == "UnauthorizedError"
        good = [("Authorization", "Basic " + base64.b64encode(b"u:s3cret").decode())]
        async with open_websocket_url(ws_url(g.url), extra_headers=good) as ws:
            await ws.send_message(
                json.dumps({"type": "unsubscribe", "ref": 1, "sessionID": "ses_x"})
            )
            assert (await recv(ws)) == {"type": "reply", "ref": 1, "data": None}


async def test_stopping_the_server_ends_open_streams(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url, timeout=10) as client:
        sid = (await client.post(S, json={})).json()["data"]["id"]
        async with trio.open_nursery() as nursery:
            ws, stream = await small_window_websocket(nursery, g.url)
            await ws.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
            assert (await recv(ws))["ref"] == 1
            async with client.stream("GET", f"{S}/{sid}/event") as r:
                g.server.stop()
                with trio.fail_after(5):
                    body = await r.aread()
                assert body == b""
            with trio.fail_after(5), pytest.raises(ConnectionClosed):
                await ws.get_message()
            await stream.aclose()


async def test_deleting_a_session_ends_its_streams_and_tells_everyone(tmp_path):
    async with (
        served(tmp_path) as g,
        httpx.AsyncClient(base_url=g.url, timeout=10) as client,
        open_websocket_url(ws_url(g.url)) as ws,
    ):
        pid = (await client.get("/project/current")).json()["id"]
        sid = (await client.post(S, json={})).json()["data"]["id"]
        kept = (await client.post(S, json={})).json()["data"]["id"]
        await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "one"}})
        assert (await client.post(f"{S}/{sid}/wait")).status_code == 204  # now a known id
        await ws.send_message(json.dumps({"type": "subscribe", "ref": 1, "sessionID": sid}))
        seen: list[str] = []
        globally: list[dict] = []

        async def session_stream() -> None:
            async with client.stream("GET", f"{S}/{sid}/event") as r:
                async for line in r.aiter_lines():  # ends when the server ends the stream
                    if line.startswith("data: "):
                        seen.append(json.loads(line[6:])["type"])

        async def global_stream(task_status=trio.TASK_STATUS_IGNORED) -> None:
            async with client.stream("GET", "/api/event") as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        globally.append(json.loads(line[6:]))
                        if globally[-1]["type"] == "server.connected":
                            task_status.started()
                        if globally[-1]["type"] == "session.deleted":
                            return

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session_stream)
                await nursery.start(global_stream)
                frames = [await recv(ws)]
                while frames[-1]["type"] != "event" or frames[-1]["seq"] < 2:
                    frames.append(await recv(ws))
                r = await client.delete(f"/project/{pid}/session/{sid}")
                assert r.status_code == 200 and r.json() is True
                while frames[-1]["type"] != "deleted":
                    frames.append(await recv(ws))
        assert frames[-1] == {"type": "deleted", "sessionID": sid}
        assert "session.next.step.ended" in seen and "session.deleted" not in seen
        deleted = globally[-1]
        assert deleted["properties"]["sessionID"] == sid
        assert deleted["properties"]["info"]["id"] == sid

        for method, path in (("GET", f"{S}/{sid}"), ("POST", f"{S}/{sid}/wait"),
                             ("POST", f"{S}/{sid}/prompt"), ("GET", f"{S}/{sid}/event"),
                             ("DELETE", f"/project/{pid}/session/{sid}")):  # fmt: skip
            body = {"prompt": {"text": "again"}} if path.endswith("prompt") else None
            r = await client.request(method, path, json=body)
            assert r.status_code == 404, (method, path)
            assert r.json()["_tag"] == "SessionNotFoundError"
        r = await client.delete(f"/project/prj_other/session/{kept}")
        assert r.status_code == 404 and r.json()["_tag"] == "NotFoundError"
        assert (await client.get(f"{S}/{kept}")).status_code == 200


LIMIT = 64 * 1024


@pytest.mark.parametrize(
    "oversized",
    [
        "x" * (16 * LIMIT),  # its tail and the client's answering close arrive together
        b"\0" * (LIMIT + 1),
        "\u00e9" * (LIMIT // 2 + 1),  # fewer characters than the limit, more UTF-8 bytes
    ],
    ids=["text-16x", "bytes-just-over", "utf8-over"],
)
async def test_oversized_websocket_message_closes_1009_and_the_tcp_connection(tmp_path, oversized):
    async with served(tmp_path, max_body=LIMIT) as g:
        host, port = g.url.removeprefix("http://").split(":")
        stream = await trio.open_tcp_stream(host, int(port))
        started = trio.current_time()
        # The client's reader task runs until the server closes TCP: leaving the nursery
        # waits for that, which is where a client hung when the server kept it open.
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                ws = await wrap_client_stream(
                    nursery, stream, host, "/api/ws", max_message_size=2**24
                )
                at_limit = '"' + "x" * (LIMIT - 2) + '"'  # a JSON string, not a frame
                await ws.send_message(at_limit)
                assert (await recv(ws))["error"]["_tag"] == "InvalidRequestError"
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.send_message(oversized)
                    await ws.send_message("{}")  # sent before the close frame is seen
                    await ws.get_message()
                assert closed.value.reason.code == 1009
        assert trio.current_time() - started < 3
        await stream.aclose()
        # the server's websocket task ended and the server still serves websockets
        await eventually(lambda: not gateway_of(g.server.app).streams)
        async with open_websocket_url(ws_url(g.url)) as ws:
            await ws.send_message(json.dumps({"type": "unsubscribe", "ref": 1, "sessionID": "s"}))
            assert (await recv(ws)) == {"type": "reply", "ref": 1, "data": None}
