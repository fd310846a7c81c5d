"""V2 session routes over real HTTP, validated against OpenCode's OpenAPI schemas."""

from __future__ import annotations

import httpx
import msgspec
from openapi_spec_validator import validate as validate_openapi

from runtime import IdGenerator

from .conftest import OPENAPI, assert_valid, component, response_schema, served

S = "/api/session"
SID = "/api/session/{sessionID}"


async def _create(client: httpx.AsyncClient) -> str:
    r = await client.post(S, json={})
    assert r.status_code == 200, r.text
    assert_valid(r.json(), response_schema(S, "post", 200))
    return str(r.json()["data"]["id"])


async def test_session_routes_answer_with_openapi_shapes(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        r = await client.get("/api/health")
        assert r.json() == {"healthy": True}
        assert_valid(r.json(), response_schema("/api/health", "get", 200))

        sid = await _create(client)
        r = await client.get(f"{S}/{sid}")
        assert r.status_code == 200
        assert_valid(r.json(), response_schema(SID, "get", 200))

        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "hello"}})
        assert r.status_code == 200, r.text
        assert_valid(r.json(), response_schema(SID + "/prompt", "post", 200))
        assert r.json()["data"]["sessionID"] == sid

        r = await client.post(f"{S}/{sid}/wait")
        assert r.status_code == 204

        r = await client.get(S)
        assert_valid(r.json(), response_schema(S, "get", 200))
        assert [s["id"] for s in r.json()["data"]] == [sid]

        r = await client.get(f"{S}/{sid}/context")
        assert_valid(r.json(), response_schema(SID + "/context", "get", 200))
        types = [m["type"] for m in r.json()["data"]]
        assert types == ["user", "assistant"]
        assistant = r.json()["data"][1]
        assert assistant["content"][0]["text"] == "answer 1"

        r = await client.get(f"{S}/{sid}/message", params={"limit": 1, "order": "asc"})
        assert_valid(r.json(), response_schema(SID + "/message", "get", 200))
        first = r.json()["data"]
        assert [m["type"] for m in first] == ["user"]
        nxt = r.json()["cursor"]["next"]
        r = await client.get(f"{S}/{sid}/message", params={"limit": 1, "cursor": nxt})
        assert [m["type"] for m in r.json()["data"]] == ["assistant"]

        mid = first[0]["id"]
        r = await client.get(f"{S}/{sid}/message/{mid}")
        assert r.status_code == 200
        assert_valid(r.json(), response_schema(SID + "/message/{messageID}", "get", 200))
        assert r.json()["data"]["text"] == "hello"

        r = await client.post(f"{S}/{sid}/agent", json={"agent": "plan"})
        assert r.status_code == 204
        r = await client.post(f"{S}/{sid}/model", json={"model": {"id": "m1", "providerID": "p1"}})
        assert r.status_code == 204
        info = (await client.get(f"{S}/{sid}")).json()["data"]
        assert info["agent"] == "plan" and info["model"] == {"id": "m1", "providerID": "p1"}

        r = await client.post(f"{S}/{sid}/interrupt")
        assert r.status_code == 204


async def test_prompt_retry_conflict_and_errors(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _create(client)
        body = {"id": "msg_0123456789abcdefghijklmnop", "prompt": {"text": "once"}}
        body["id"] = IdGenerator().new("msg")
        first = await client.post(f"{S}/{sid}/prompt", json=body)
        again = await client.post(f"{S}/{sid}/prompt", json=body)
        assert first.status_code == again.status_code == 200
        # The stored receipt: the same fields, and ``promotedSeq`` once the session's drain
        # has promoted the prompt, which it may have done between the two requests.
        stored, receipt = again.json()["data"], first.json()["data"]
        promoted = stored.pop("promotedSeq", None)
        assert promoted is None or promoted > stored["admittedSeq"]
        assert stored == {k: v for k, v in receipt.items() if k != "promotedSeq"}

        changed = {**body, "prompt": {"text": "different"}}
        r = await client.post(f"{S}/{sid}/prompt", json=changed)
        assert r.status_code == 409
        assert r.json()["_tag"] == "ConflictError"
        assert_valid(r.json(), response_schema(SID + "/prompt", "post", 409))

        missing = "ses_" + "0" * 26
        r = await client.post(f"{S}/{missing}/prompt", json={"prompt": {"text": "x"}})
        assert r.status_code == 404
        assert r.json()["_tag"] == "SessionNotFoundError"
        assert_valid(r.json(), response_schema(SID + "/prompt", "post", 404))
        r = await client.get(f"{S}/{missing}")
        assert r.status_code == 404 and r.json()["sessionID"] == missing

        for bad in (
            b"{not json",
            b'{"prompt": {"text": 3}}',
            b'{"prompt": {"text": "x"}, "zzz": 1}',
        ):
            r = await client.post(
                f"{S}/{sid}/prompt", content=bad, headers={"content-type": "application/json"}
            )
            assert r.status_code == 400, bad
            assert_valid(r.json(), response_schema(SID + "/prompt", "post", 400))
        r = await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": ""}})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"

        r = await client.post(f"{S}/ses_nothere/compact")
        assert r.status_code == 404
        assert_valid(r.json(), response_schema(SID + "/compact", "post", 404))

        r = await client.get(f"{S}/{sid}/message", params={"cursor": "asc:1", "order": "asc"})
        assert r.status_code == 400
        r = await client.get(f"{S}/{sid}/message", params={"limit": 201})
        assert r.status_code == 400
        r = await client.get(f"{S}/{sid}/message/msg_nothere")
        assert r.status_code == 404
        assert_valid(r.json(), component("MessageNotFoundError"))


async def test_large_bodies_are_refused(tmp_path):
    async with served(tmp_path, max_body=4096) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _create(client)
        big = msgspec.json.encode({"prompt": {"text": "x" * 10_000}})
        r = await client.post(
            f"{S}/{sid}/prompt", content=big, headers={"content-type": "application/json"}
        )
        assert r.status_code == 413
        assert r.json() == {
            "_tag": "PayloadTooLargeError",
            "message": "The request body is over the limit of 4096 bytes (4 KiB)",
        }
        # OpenCode's V1 routes answer the same, and a refused session create makes nothing.
        v1 = msgspec.json.encode({"parts": [{"type": "text", "text": "x" * 10_000}]})
        for path in (f"/session/{sid}/message", f"/session/{sid}/prompt_async", "/session"):
            r = await client.post(path, content=v1, headers={"content-type": "application/json"})
            assert r.status_code == 413, path
            assert r.json() == {
                "_tag": "PayloadTooLargeError",
                "message": "The request body is over the limit of 4096 bytes (4 KiB)",
            }
        assert (await client.get(f"{S}/{sid}/context")).json()["data"] == []
        assert [s["id"] for s in (await client.get(S)).json()["data"]] == [sid]


async def test_doc_describes_the_routes_it_serves(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        doc = (await client.get("/doc")).json()
        assert doc["openapi"] == "3.1.0"
        validate_openapi(doc)  # a valid OpenAPI 3.1 document, not just a 3.1 label
        assert {"/api/session", SID + "/prompt", SID + "/event", "/api/actors"} <= set(doc["paths"])
        sid = (await client.post(S, json={})).json()["data"]["id"]
        receipt = (await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": "a"}})).json()
        await client.post(f"{S}/{sid}/wait")
        context = (await client.get(f"{S}/{sid}/context")).json()
        op = doc["paths"][SID + "/prompt"]["post"]
        for body, schema in (
            (receipt, op["responses"]["200"]["content"]["application/json"]["schema"]),
            (
                context,
                doc["paths"][SID + "/context"]["get"]["responses"]["200"]["content"][
                    "application/json"
                ]["schema"],
            ),  # fmt: skip
        ):
            assert_valid(body, {**schema, "components": doc["components"]})
        r = await client.post(f"{S}/{sid}/revert/stage", json={})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
        r = await client.post(f"{S}/{sid}/revert/stage", json={"messageID": "msg_nothere"})
        assert r.status_code == 404 and r.json()["_tag"] == "MessageNotFoundError"
        assert r.json()["sessionID"] == sid and r.json()["messageID"] == "msg_nothere"


async def test_history_pages_the_durable_events(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _create(client)
        for text in ("one", "two"):
            await client.post(f"{S}/{sid}/prompt", json={"prompt": {"text": text}})
            await client.post(f"{S}/{sid}/wait")
        r = await client.get(f"{S}/{sid}/history", params={"limit": 1000})
        assert r.status_code == 200
        assert set(r.json()) == {"data", "hasMore"} and r.json()["hasMore"] is False
        everything = r.json()["data"]
        # OpenCode's later event model renamed two events the runtime's vocabulary keeps
        # (prompt.promoted, interrupt.requested); every other one validates as published.
        known = {
            one["$ref"].rsplit("/", 1)[-1]
            for one in OPENAPI["components"]["schemas"]["SessionDurableEvent"]["oneOf"]
        }
        names = {
            OPENAPI["components"]["schemas"][name]["properties"]["type"]["enum"][0]
            for name in known
        }
        for event in everything:
            if event["type"] in names:
                assert_valid(event, component("SessionDurableEvent"))
        assert {e["type"] for e in everything} - names <= {"session.next.prompt.promoted"}
        seqs = [e["durable"]["seq"] for e in everything]
        assert seqs == sorted(seqs) and len(seqs) > 6
        assert all(e["type"].startswith("session.next.") for e in everything)

        paged: list[int] = []
        after = None
        while True:
            params = {"limit": 3} if after is None else {"limit": 3, "after": after}
            body = (await client.get(f"{S}/{sid}/history", params=params)).json()
            paged += [e["durable"]["seq"] for e in body["data"]]
            if not body["hasMore"]:
                break
            assert len(body["data"]) == 3
            after = body["data"][-1]["durable"]["seq"]
        assert paged == seqs

        r = await client.get(f"{S}/{sid}/history", params={"limit": 0})
        assert r.status_code == 400 and r.json()["_tag"] == "InvalidRequestError"
        r = await client.get(f"{S}/{sid}/history", params={"after": "x"})
        assert r.status_code == 400
        r = await client.get(f"{S}/ses_nothere/history")
        assert r.status_code == 404 and r.json()["_tag"] == "SessionNotFoundError"
