"""OpenCode's V1 routes and V2 catalog routes on a served runtime (real Hypercorn, real
HTTP client): shell, fork, the catalog, share and routes that do not exist, each answer
validated against OpenCode's OpenAPI document."""

from __future__ import annotations

from typing import Any

import httpx
import trio

from actors import Configuration

from .conftest import assert_valid, response_schema, served
from .v1 import v1_stream


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


async def _session(client: httpx.AsyncClient, title: str = "talk") -> str:
    r = await client.post("/session", json={"title": title})
    return str(_valid(r, "/session", "post")["id"])


async def _prompt(client: httpx.AsyncClient, sid: str, text: str) -> dict[str, Any]:
    body = {"agent": "build", "parts": [{"type": "text", "text": text}]}
    r = await client.post(f"/session/{sid}/message", json=body, timeout=30)
    return dict(_valid(r, "/session/{sessionID}/message", "post"))


async def test_a_prompt_is_answered_with_its_own_reply_past_the_listing_bound(
    tmp_path: Any,
) -> None:
    """``POST /session/{id}/message`` reads back from the newest message to the prompt,
    so a session longer than the listing bound still answers each prompt's reply."""
    from gateway.opencode import FileLimits

    async with served(tmp_path, file_limits=FileLimits(max_messages=3)) as g:
        async with httpx.AsyncClient(base_url=g.url) as client:
            sid = await _session(client)
            for n in range(6):
                reply = await _prompt(client, sid, f"prompt {n}")
                assert reply["info"]["role"] == "assistant"
                text = [p["text"] for p in reply["parts"] if p["type"] == "text"]
                assert text == [f"answer {2 * n + 1}"]  # the history it was asked with


async def test_fork_copies_the_history_before_a_message_durably(tmp_path: Any) -> None:
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client)
        await _prompt(client, sid, "one")
        await _prompt(client, sid, "two")
        listed = _valid(await client.get(f"/session/{sid}/message"), "/session/{sessionID}/message")
        second_user = listed[2]["info"]["id"]

        r = await client.post(f"/session/{sid}/fork", json={"messageID": second_user})
        fork = _valid(r, "/session/{sessionID}/fork", "post")
        assert fork["title"] == "talk (fork #1)" and "parentID" not in fork
        assert fork["id"] != sid and fork["directory"] == str(tmp_path.resolve())
        copied = _valid(
            await client.get(f"/session/{fork['id']}/message"), "/session/{sessionID}/message"
        )
        assert [m["info"]["role"] for m in copied] == ["user", "assistant"]
        assert copied[0]["parts"][0]["text"] == "one"
        assert copied[1]["parts"][1]["text"] == listed[1]["parts"][1]["text"]
        assert copied[1]["info"]["parentID"] == copied[0]["info"]["id"]
        assert {m["info"]["id"] for m in copied}.isdisjoint(m["info"]["id"] for m in listed)

        # the fork continues from the copy: the model sees it (the echo counts messages)
        reply = await _prompt(client, fork["id"], "three")
        assert reply["parts"][1]["text"] == "answer 3"

        whole = _valid(
            await client.post(f"/session/{fork['id']}/fork"), "/session/{sessionID}/fork", "post"
        )
        assert whole["title"] == "talk (fork #2)"
        bad = await client.post(f"/session/{sid}/fork", json={"messageID": "msg_nothere"})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
        unknown = await client.post(f"/session/{sid}/fork", json={"messageId": second_user})
        assert unknown.status_code == 400
        fork_id, whole_id = fork["id"], whole["id"]

    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        again = (await client.get(f"/session/{fork_id}/message")).json()
        assert [m["info"]["role"] for m in again] == ["user", "assistant"] * 2
        assert len((await client.get(f"/session/{whole_id}/message")).json()) == 4


async def test_shell_runs_the_command_and_records_it_in_the_history(tmp_path: Any) -> None:
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client)
        async with v1_stream(g.url) as events:
            body = {"agent": "build", "model": {"providerID": "p", "modelID": "m"},
                    "command": "echo shell-said-hi"}  # fmt: skip
            r = await client.post(f"/session/{sid}/shell", json=body, timeout=30)
            answer = _valid(r, "/session/{sessionID}/shell", "post")
            await events.until(
                lambda p: (
                    p["type"] == "session.status"
                    and p["properties"] == {"sessionID": sid, "status": {"type": "idle"}}
                )
            )
        assert answer["info"]["role"] == "assistant"
        assert answer["info"]["modelID"] == "m" and answer["info"]["providerID"] == "p"
        [tool] = [p for p in answer["parts"] if p["type"] == "tool"]
        assert tool["tool"] == "bash" and tool["state"]["status"] == "completed"
        assert "shell-said-hi" in tool["state"]["output"]
        assert "shell-said-hi" in tool["state"]["metadata"]["output"]
        assert events.parts(sid)[tool["id"]]["state"]["status"] == "completed"
        listed = (await client.get(f"/session/{sid}/message")).json()
        assert listed[0]["parts"][0]["text"] == "The following tool was executed by the user"
        assert listed[1]["info"]["id"] == answer["info"]["id"]

        # the next turn sees the command and its output (the echo counts messages)
        reply = await _prompt(client, sid, "and now?")
        assert reply["parts"][1]["text"] == "answer 4"

        empty = await client.post(f"/session/{sid}/shell", json={"agent": "build", "command": " "})
        assert empty.status_code == 400 and empty.json()["_tag"] == "InvalidRequestError"


async def test_a_running_shell_command_is_busy_and_abort_stops_it(tmp_path: Any) -> None:
    busy = {"sessionID": "", "status": {"type": "busy"}}
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client)
        busy["sessionID"] = sid
        answers: list[httpx.Response] = []

        async def run() -> None:
            body = {"agent": "build", "command": "while true; do sleep 0.02; done"}
            answers.append(await client.post(f"/session/{sid}/shell", json=body, timeout=30))

        async with v1_stream(g.url) as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await events.until(
                    lambda p: p["type"] == "session.status" and p["properties"] == busy
                )
                status = await client.get("/session/status")
                assert _valid(status, "/session/status")[sid] == {"type": "busy"}
                body = {"agent": "build", "command": "true"}
                again = await client.post(f"/session/{sid}/shell", json=body)
                assert again.status_code == 409 and again.json()["_tag"] == "SessionBusyError"
                schema = response_schema("/session/{sessionID}/shell", "post", 409)
                assert_valid(again.json(), schema)
                assert (await client.post(f"/session/{sid}/abort")).json() is True
            idle = {"sessionID": sid, "status": {"type": "idle"}}
            await events.until(lambda p: p["type"] == "session.status" and p["properties"] == idle)
        [answer] = answers
        parts = _valid(answer, "/session/{sessionID}/shell", "post")["parts"]
        [tool] = [p for p in parts if p["type"] == "tool"]
        assert tool["state"]["status"] == "error"
        assert tool["state"]["error"] == "Tool execution interrupted"
        assert sid not in (await client.get("/session/status")).json()


async def test_share_gives_a_read_only_link_that_unshare_takes_away(tmp_path: Any) -> None:
    async with (
        served(tmp_path, password="pw") as g,
        httpx.AsyncClient(base_url=g.url, auth=("opencode", "pw")) as client,
        httpx.AsyncClient() as anyone,
    ):
        # unset: sharing is manual, and OpenCode's UI offers /share and /unshare
        assert "share" not in _valid(await client.get("/config"), "/config")
        sid = await _session(client)
        await _prompt(client, sid, "hello")
        path = "/session/{sessionID}/share"
        shared = _valid(await client.post(f"/session/{sid}/share"), path, "post")
        url = shared["share"]["url"]
        assert url.startswith(f"{g.url}/s/{sid}/") and url.endswith("/")
        secret = url.rstrip("/").rsplit("/", 1)[1]
        assert len(secret) >= 43  # 256 random bits
        again = _valid(await client.post(f"/session/{sid}/share"), path, "post")
        assert again["share"] == {"url": url}  # a shared session keeps its link
        assert (await client.get(f"/session/{sid}")).json()["share"] == {"url": url}

        # the link's reads need no password; the rest of the API still does
        got = await anyone.get(url + "api/session")
        assert got.status_code == 200 and got.json()["data"]["id"] == sid
        page = await anyone.get(url + "api/session/message", params={"limit": 10})
        assert [m["type"] for m in page.json()["data"]][:2] == ["assistant", "user"]
        history = await anyone.get(url + "api/session/history", params={"after": 0})
        assert "session.next.prompt.admitted" in [e["type"] for e in history.json()["data"]]
        assert (await anyone.get(f"{g.url}/api/session/{sid}")).status_code == 401
        assert (await anyone.post(url + "api/session/prompt", json={})).status_code in (401, 405)
        wrong = await anyone.get(f"{g.url}/s/{sid}/{'x' * len(secret)}/api/session")
        assert wrong.status_code == 404 and wrong.json()["_tag"] == "NotFoundError"

        unshared = _valid(await client.delete(f"/session/{sid}/share"), path, "delete")
        assert "share" not in unshared
        gone = await anyone.get(url + "api/session")
        assert gone.status_code == 404 and gone.json() == wrong.json()
        assert "share" not in _valid(await client.delete(f"/session/{sid}/share"), path, "delete")
        for method in ("POST", "DELETE"):
            missing = await client.request(method, "/session/ses_nope/share")
            assert missing.status_code == 404
            assert_valid(missing.json(), response_schema(path, method.lower(), 404))
            assert missing.json()["data"]["message"] == "Session not found: ses_nope"
        relink = _valid(await client.post(f"/session/{sid}/share"), path, "post")["share"]["url"]
        assert relink != url  # a new secret

    # the link is stored with the session: it opens after a restart
    async with served(tmp_path) as g2, httpx.AsyncClient() as anyone:
        moved = relink.replace(g.url, g2.url)
        got = await anyone.get(moved + "api/session")
        assert got.status_code == 200 and got.json()["data"]["share"]["url"] == relink


async def test_share_is_refused_when_disabled_and_auto_shares_new_sessions(
    tmp_path: Any,
) -> None:
    (tmp_path / "kittiwake.json").write_text('{"share": "disabled"}')
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with (
        served(tmp_path, configuration=configuration) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        assert _valid(await client.get("/config"), "/config")["share"] == "disabled"
        sid = await _session(client)
        path = "/session/{sessionID}/share"
        refused = await client.post(f"/session/{sid}/share")
        assert refused.status_code == 400
        assert_valid(refused.json(), response_schema(path, "post", 400))
        assert refused.json()["name"] == "BadRequest"
        assert "disabled" in refused.json()["data"]["message"]
        v2 = await client.post(f"/api/session/{sid}/share")
        assert v2.status_code == 400 and v2.json()["_tag"] == "BadRequest"
        assert "share" not in (await client.get(f"/session/{sid}")).json()

        (tmp_path / "kittiwake.json").write_text('{"share": "auto"}')
        auto = _valid(await client.post("/session", json={}), "/session", "post")
        assert auto["share"]["url"].startswith(f"{g.url}/s/{auto['id']}/")
        v2 = (await client.post("/api/session", json={})).json()["data"]
        assert v2["share"]["url"].startswith(f"{g.url}/s/{v2['id']}/")
        opened = await client.get(v2["share"]["url"] + "api/session")
        assert opened.json()["data"]["id"] == v2["id"]
        assert "share" not in (await client.get(f"/session/{sid}")).json()  # only new ones


async def test_unknown_routes_answer_json_naming_the_route(tmp_path: Any) -> None:
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as client:
        sid = await _session(client)
        for method, url in (("GET", "/nope"), ("POST", f"/session/{sid}/nothing")):
            r = await client.request(method, url)
            assert r.status_code == 404 and r.headers["content-type"] == "application/json"
            # OpenCode's shape on its V1 paths (``NotFoundError``), as its clients read it
            assert r.json() == {
                "name": "NotFoundError",
                "data": {"message": f"No route: {method} {url}"},
            }
        wrong = await client.put("/session")
        assert wrong.status_code == 405 and wrong.headers["content-type"] == "application/json"
        assert wrong.headers["allow"] == "GET, HEAD, OPTIONS, POST"
        assert wrong.json()["name"] == "MethodNotAllowedError"
        assert wrong.json()["data"]["message"].startswith(
            "PUT is not allowed on /session; allowed: GET"
        )
        # the V2 API keeps its own shape
        v2 = await client.get("/api/nope")
        assert v2.status_code == 404
        assert v2.json() == {"_tag": "NotFoundError", "message": "No route: GET /api/nope"}
