"""Session input checked at the door, over every route and the embedded API; cache keys
within the provider's limit; the prompt receipt of an exact retry.

The runtime here streams through a real ``ProviderClient`` (its catalog: the models.dev
sample plus a configured OpenAI-compatible provider ``local``) to a local HTTP server that
speaks OpenAI's chat wire format, and is served by real Hypercorn.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from gateway import Server, serve
from runtime import InvalidSessionInputError, Location, ModelRef, open_runtime
from runtime.llm import (
    MAX_PROMPT_CACHE_KEY,
    Auth,
    Catalog,
    ProviderClient,
    RetryPolicy,
    ScriptedLLM,
    render_stream,
)
from tests.config.conftest import base_env, local_provider, serving
from tests.llm.conftest import SAMPLE, LocalServer, Reply

from .conftest import answer, assert_valid, component, served

S = "/api/session"
LOCAL = {"id": "coder", "providerID": "local"}
HEX_ID = "ses_" + "0123456789abcdef" * 4


@dataclass
class Door:
    rt: Any
    server: Server
    provider: LocalServer
    client: httpx.AsyncClient
    work: Path

    def reply(self, text: str) -> None:
        self.provider.queue(Reply(chunks=[render_stream(answer(text), "openai-chat")]))


@asynccontextmanager
async def door(tmp_path: Path) -> AsyncIterator[Door]:
    config = {
        "provider": {
            "local": {"npm": "@ai-sdk/openai-compatible", "models": {"coder": {}}},
        }
    }
    async with trio.open_nursery() as nursery:
        provider = LocalServer()
        listeners = await nursery.start(
            partial(trio.serve_tcp, provider.handle, 0, host="127.0.0.1")
        )
        provider.port = listeners[0].socket.getsockname()[1]
        config["provider"]["local"]["options"] = {"baseURL": provider.base_url + "/v1"}
        catalog = Catalog.from_models_dev(json.loads(SAMPLE.read_text())).with_config(config)
        work = tmp_path / "work"
        (work / "src").mkdir(parents=True)
        (work / "README").write_text("not a directory\n")
        async with httpx.AsyncClient() as http:
            llm = ProviderClient(
                catalog, Auth(env={}), http_client=http, retry=RetryPolicy(max_attempts=1)
            )
            model = ModelRef(id="coder", provider_id="local")
            async with open_runtime(data_dir=tmp_path / "data", llm=llm, default_model=model) as rt:
                async with trio.open_nursery() as inner:
                    server = await inner.start(partial(serve, rt, "127.0.0.1", 0, directory=work))
                    try:
                        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
                            yield Door(rt, server, provider, client, work)
                    finally:
                        server.stop()
        nursery.cancel_scope.cancel()


def refused(r: httpx.Response, field: str, words: str) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["_tag"] == "InvalidRequestError"
    assert body["field"] == field
    assert words in body["message"], body["message"]
    assert_valid(body, component("InvalidRequestError"))


async def test_creation_refuses_a_bad_directory_agent_or_model_and_writes_nothing(tmp_path):
    async with door(tmp_path) as d:
        c = d.client
        cases = [
            ({"location": {"directory": "src"}}, "location", "absolute path"),
            ({"location": {"directory": str(d.work / "missing")}}, "location", "does not exist"),
            ({"location": {"directory": str(d.work / "README")}}, "location", "not a directory"),
            ({"agent": "nobody"}, "agent", "Unknown agent 'nobody'; known agents: build"),
            ({"model": {"id": "nope", "providerID": "local"}}, "model", "local/nope"),
            ({"model": {"id": "gpt-4-turbo", "providerID": "nobody"}}, "model", "nobody"),
            ({"model": {**LOCAL, "variant": "max"}}, "model", "no variant 'max'"),
            # a valid id does not let a bad input through
            ({"id": HEX_ID, "agent": "nobody"}, "agent", "nobody"),
        ]
        for body, field, words in cases:
            refused(await c.post(S, json=body), field, words)
        assert (await c.get(S)).json()["data"] == []

        pid = (await c.get("/project/current")).json()["id"]
        for body, field, words in [
            ({"directory": "missing"}, "location", "does not exist"),
            ({"directory": "README"}, "location", "not a directory"),
            ({"agent": "nobody"}, "agent", "nobody"),
        ]:
            refused(await c.post(f"/project/{pid}/session", json=body), field, words)
        assert (await c.get(f"/project/{pid}/session")).json() == []

        # what the runtime can run is accepted: a configured provider's model, a catalog one
        ok = await c.post(S, json={"agent": "plan", "model": LOCAL})
        assert ok.status_code == 200 and ok.json()["data"]["agent"] == "plan"
        models_dev = {"id": "gpt-4-turbo", "providerID": "openai"}
        assert (await c.post(S, json={"model": models_dev})).status_code == 200
        where = {"location": {"directory": str(d.work / "src")}}
        assert (await c.post(S, json=where)).json()["data"]["location"] == where["location"]
        r = await c.post(f"/project/{pid}/session", json={"directory": "src", "agent": "plan"})
        assert r.status_code == 200 and r.json()["directory"] == str(d.work / "src")


async def test_switches_refuse_an_unknown_agent_or_model_over_every_route(tmp_path):
    async with door(tmp_path) as d:
        c = d.client
        pid = (await c.get("/project/current")).json()["id"]
        sid = (await c.post(S, json={})).json()["data"]["id"]
        before = await d.rt.sessions.get(sid)

        refused(await c.post(f"{S}/{sid}/agent", json={"agent": "nobody"}), "agent", "nobody")
        bad_model = {"model": {"id": "nope", "providerID": "local"}}
        refused(await c.post(f"{S}/{sid}/model", json=bad_model), "model", "local/nope")
        message = f"/project/{pid}/session/{sid}/message"
        text = [{"type": "text", "text": "hi"}]
        # a good agent with a bad model switches neither
        body = {"parts": text, "agent": "plan", "model": {"modelID": "nope", "providerID": "local"}}
        refused(await c.post(message, json=body), "model", "local/nope")
        refused(await c.post(message, json={"parts": text, "agent": "nobody"}), "agent", "nobody")
        init = {"modelID": "nope", "providerID": "local", "messageID": "msg_init"}
        refused(await c.post(f"/project/{pid}/session/{sid}/init", json=init), "model", "nope")
        assert await d.rt.sessions.get(sid) == before
        assert d.provider.requests == []  # nothing reached the provider either

        assert (await c.post(f"{S}/{sid}/agent", json={"agent": "plan"})).status_code == 204
        models_dev = {"id": "gpt-4-turbo", "providerID": "openai"}
        assert (await c.post(f"{S}/{sid}/model", json={"model": models_dev})).status_code == 204
        data = (await c.get(f"{S}/{sid}")).json()["data"]
        assert (data["agent"], data["model"]) == ("plan", models_dev)


async def test_the_embedded_api_raises_one_typed_error(tmp_path):
    async with door(tmp_path) as d:
        sessions = d.rt.sessions
        here = Location(directory=str(d.work))
        bad: list[tuple[dict[str, Any], str]] = [
            ({"location": Location(directory="work")}, "location"),
            ({"location": Location(directory=str(d.work / "gone"))}, "location"),
            ({"location": here, "agent": "nobody"}, "agent"),
            ({"location": here, "model": ModelRef(id="nope", provider_id="local")}, "model"),
        ]
        for options, field in bad:
            with pytest.raises(InvalidSessionInputError) as caught:
                await sessions.create(**options)
            assert caught.value.field == field
        assert (await sessions.list()).data == []

        sid = (await sessions.create(location=here)).id
        with pytest.raises(InvalidSessionInputError) as caught:
            await sessions.switch_agent(sid, "nobody")
        assert caught.value.field == "agent"
        with pytest.raises(InvalidSessionInputError) as caught:
            await sessions.switch_model(sid, ModelRef(id="coder", provider_id="elsewhere"))
        assert caught.value.field == "model"
        info = await sessions.switch_model(sid, ModelRef(id="coder", provider_id="local"))
        assert info.model == ModelRef(id="coder", provider_id="local")

        # a switch checks what it switches, not the Location the session already has
        later = d.work / "later"
        later.mkdir()
        moved = (await sessions.create(location=Location(directory=str(later)))).id
        later.rmdir()
        await sessions.switch_agent(moved, "plan")
        info = await sessions.switch_model(moved, ModelRef(id="gpt-4-turbo", provider_id="openai"))
        assert (info.agent, info.model.id) == ("plan", "gpt-4-turbo")


async def test_a_client_without_a_catalog_leaves_models_to_the_turn(tmp_path):
    # ScriptedLLM cannot tell which models exist: only the Location and agent are checked
    async with served(tmp_path, llm=ScriptedLLM([answer("ok")])) as g:
        async with httpx.AsyncClient(base_url=g.url) as c:
            r = await c.post(S, json={"model": {"id": "any", "providerID": "thing"}})
            assert r.status_code == 200
            refused(await c.post(S, json={"agent": "nobody"}), "agent", "nobody")


async def test_cache_keys_stay_within_the_providers_limit(tmp_path):
    async with door(tmp_path) as d:
        c = d.client
        long_id = "ses_" + "K" * 80  # a caller's id of the longest shape accepted
        for sid in (HEX_ID, long_id):
            assert (await c.post(S, json={"id": sid})).status_code == 200
            for turn in ("one", "two"):
                d.reply("ok")
                r = await c.post(f"{S}/{sid}/prompt", json={"prompt": {"text": turn}})
                assert r.status_code == 200
                assert (await c.post(f"{S}/{sid}/wait")).status_code == 204
        keys = [request.json()["prompt_cache_key"] for request in d.provider.requests]
        assert keys[:2] == [HEX_ID.removeprefix("ses_")] * 2  # as OpenCode sends it
        assert len(keys[2]) == MAX_PROMPT_CACHE_KEY and keys[2] == keys[3]  # stable per session
        assert all(len(key) <= MAX_PROMPT_CACHE_KEY for key in keys)
        for sid in (HEX_ID, long_id):  # every turn answered: the provider took each request
            messages = (await c.get(f"{S}/{sid}/message", params={"order": "asc"})).json()
            answers = [m for m in messages["data"] if m["type"] == "assistant"]
            assert [(m["finish"], m["content"][0]["text"]) for m in answers] == [("stop", "ok")] * 2


async def test_an_exact_retry_returns_the_stored_receipt_with_its_promotion(tmp_path):
    async with served(tmp_path) as g, httpx.AsyncClient(base_url=g.url) as c:
        sid = (await c.post(S, json={})).json()["data"]["id"]
        body = {"id": "msg_retry", "prompt": {"text": "hi"}, "delivery": "queue", "resume": False}
        first = (await c.post(f"{S}/{sid}/prompt", json=body)).json()
        assert "promotedSeq" not in first["data"]
        again = (await c.post(f"{S}/{sid}/prompt", json=body)).json()
        assert again == first  # not promoted yet: the identical body

        await c.post(f"{S}/{sid}/prompt", json={**body, "resume": True})  # a retry that wakes
        assert (await c.post(f"{S}/{sid}/wait")).status_code == 204
        after = (await c.post(f"{S}/{sid}/prompt", json=body)).json()
        promoted = after["data"].pop("promotedSeq")
        assert after == first  # the same receipt, now carrying where it was promoted
        assert isinstance(promoted, int) and promoted > first["data"]["admittedSeq"]
        history = (await c.get(f"{S}/{sid}/history")).json()["data"]
        seqs = {e["type"]: e["durable"]["seq"] for e in history}
        assert seqs["session.next.prompt.promoted"] == promoted
        assert_valid({**first["data"], "promotedSeq": promoted}, component("SessionInputAdmitted"))

        # the websocket's prompt frame answers the same receipt
        url = g.url.replace("http://", "ws://") + "/api/ws"
        async with open_websocket_url(url) as ws:
            await ws.send_message(
                json.dumps({"type": "prompt", "ref": 1, "sessionID": sid, **body})
            )
            with trio.fail_after(10):
                reply = json.loads(await ws.get_message())
        assert reply == {
            "type": "reply",
            "ref": 1,
            "data": {**first["data"], "promotedSeq": promoted},
        }


async def test_models_are_checked_against_the_locations_configured_providers(tmp_path):
    # `kittiwake serve` with no credentials: only the project's configuration has a provider
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with trio.open_nursery() as nursery:
        provider = LocalServer()
        listeners = await nursery.start(
            partial(trio.serve_tcp, provider.handle, 0, host="127.0.0.1")
        )
        provider.port = listeners[0].socket.getsockname()[1]
        document = {"provider": local_provider(provider.port, "echo-1")}
        (project / "kittiwake.json").write_text(json.dumps(document))
        async with (
            serving(base_env(tmp_path), elsewhere) as served_cli,
            httpx.AsyncClient(base_url=served_cli.url, timeout=30) as c,
        ):
            here = {"directory": str(project)}
            echo = {"id": "echo-1", "providerID": "local"}
            r = await c.post(S, json={"location": here, "model": echo})
            assert r.status_code == 200, r.text
            sid = r.json()["data"]["id"]
            nope = {"id": "echo-9", "providerID": "local"}
            refused(await c.post(S, json={"location": here, "model": nope}), "model", "echo-9")
            refused(await c.post(f"{S}/{sid}/model", json={"model": nope}), "model", "echo-9")
            # a provider added to the file is reachable from then on, as for the next turn
            document = {"provider": local_provider(provider.port, "echo-1", "echo-9")}
            (project / "kittiwake.json").write_text(json.dumps(document))
            assert (await c.post(f"{S}/{sid}/model", json={"model": nope})).status_code == 204
        nursery.cancel_scope.cancel()
