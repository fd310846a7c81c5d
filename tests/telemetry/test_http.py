"""The telemetry routes over a real server, and ``kittiwake stats`` / ``trace`` against it."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from gateway import serve
from gateway.cli import _main as cli
from runtime import Location, Prompt, llm, open_runtime
from storage import TelemetryOptions, TelemetryStore
from tests.execution.conftest import answer, tool_calls

FAST = TelemetryOptions(flush_interval=0.01, sample=1.0)


@asynccontextmanager
async def served(tmp_path: Path, client: Any, **options: Any) -> AsyncIterator[Any]:
    async with open_runtime(data_dir=tmp_path / "data", llm=client, **options) as rt:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(partial(serve, rt, "127.0.0.1", 0, directory=tmp_path))
            try:
                async with httpx.AsyncClient(base_url=server.url) as http:
                    yield rt, http, server.url
            finally:
                server.stop()


async def _one_prompt(rt: Any, tmp_path: Path) -> str:
    info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
    await rt.sessions.prompt(info.id, prompt=Prompt(text="list"))
    await rt.sessions.wait_idle(info.id)
    return str(info.id)


async def test_spans_and_summary_routes_answer_from_sql(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "glob", {"pattern": "*.md"})), answer("ok")])
    async with served(tmp_path, client, telemetry=FAST) as (rt, http, _):
        sid = await _one_prompt(rt, tmp_path)
        health = await http.get("/api/health")
        assert health.status_code == 200
        assert rt.telemetry.force_flush()
        spans = (await http.get("/api/telemetry/spans", params={"sessionID": sid})).json()["data"]
        names = [s["name"] for s in spans]
        assert names.count("provider.turn") == 2 and "tool" in names and "drain" in names
        [drain] = [s for s in spans if s["name"] == "drain"]
        one = await http.get("/api/telemetry/spans", params={"traceID": drain["trace_id"]})
        assert {s["trace_id"] for s in one.json()["data"]} == {drain["trace_id"]}
        summary = await http.get("/api/telemetry/summary", params={"by": "session"})
        [row] = [r for r in summary.json()["data"] if r["key"] == sid]
        assert row["turns"] == 2 and row["tool_p50_ms"] is not None
        future = await http.get("/api/telemetry/summary", params={"since": "99999999999999"})
        assert future.json()["data"] == []
        bad = await http.get("/api/telemetry/summary", params={"by": "colour"})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
        bad = await http.get("/api/telemetry/spans", params={"since": "yesterday"})
        assert bad.status_code == 400 and "since" in bad.json()["message"]
        state = (await http.get("/api/inspector/state")).json()
        assert [s["id"] for s in state["sessions"]] == [sid]
        assert state["sessions"][0]["state"] == "idle"
        assert state["totals"]["tokens_in"] == 3
    # Requests are spans too (route template, status), ended once served: read them after.
    store = TelemetryStore.open(tmp_path / "data")
    try:
        requests = {s["name"]: s for s in store.spans(since_ns=0)}
    finally:
        store.shutdown()
    assert requests["GET /api/health"]["attributes"]["http.response.status_code"] == 200
    summary_span = requests["GET /api/telemetry/summary"]
    assert summary_span["attributes"]["http.route"] == "/api/telemetry/summary"


async def test_telemetry_routes_say_when_telemetry_is_off(tmp_path: Path) -> None:
    async with served(tmp_path, llm.ScriptedLLM([answer()])) as (_, http, _):
        off = await http.get("/api/telemetry/summary")
        assert off.status_code == 503
        assert off.json()["_tag"] == "ServiceUnavailableError"
        assert "Telemetry is off" in off.json()["message"]


async def test_stats_and_trace_commands_print_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = llm.ScriptedLLM([tool_calls(("c1", "glob", {"pattern": "*.md"})), answer("ok")])
    async with served(tmp_path, client, telemetry=FAST) as (rt, _, url):
        sid = await _one_prompt(rt, tmp_path)
        assert rt.telemetry.force_flush()
        capsys.readouterr()
        args = argparse.Namespace(attach=url, by="model", since="7d")
        assert await cli._stats(args) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[:3] == ["model", "turns", "tokens"]
        assert table[1].split()[:3] == ["default", "2", "3"]
        args = argparse.Namespace(attach=url, session=sid, drains=3)
        assert await cli._trace(args) == 0
        tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("# ") and "trace" in tree[0]
    assert tree[1].startswith("drain ")
    turns = [line for line in tree if line.startswith("  provider.turn ")]
    assert len(turns) == 2 and "kittiwake/default" in turns[0]
    assert any(line.startswith("    tool ") and "glob success" in line for line in tree)


def _priced(text: str, tokens_in: int, cost: float) -> list[Any]:
    events = answer(text)
    usage = llm.Usage(input_tokens=tokens_in, output_tokens=3, cache_read_tokens=1)
    events[-1] = llm.StepFinish(finish_reason="stop", usage=usage, cost=cost)
    return events


async def test_tokens_and_cost_are_exact_when_one_trace_in_ten_is_sampled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = 20
    client = llm.ScriptedLLM([_priced(str(n), 10 + n, 0.001 * (n + 1)) for n in range(prompts)])
    sampled = TelemetryOptions(flush_interval=0.01, sample=0.1)
    async with served(tmp_path, client, telemetry=sampled) as (rt, http, url):
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        for n in range(prompts):
            await rt.sessions.prompt(info.id, prompt=Prompt(text=f"p{n}"))
            await rt.sessions.wait_idle(info.id)
        assert rt.telemetry.force_flush()
        recorded = await trio.to_thread.run_sync(partial(rt.telemetry.spans, session_id=info.id))
        body = (await http.get("/api/telemetry/summary", params={"by": "session"})).json()
        by_model = (await http.get("/api/telemetry/summary", params={"by": "model"})).json()
        args = argparse.Namespace(attach=url, by="day", since="7d")
        capsys.readouterr()
        assert await cli._stats(args) == 0
        printed = capsys.readouterr().out
    # The spans hold only the sampled drains (all 20 sampled: about 1e-20)...
    assert sum(s["name"] == "provider.turn" for s in recorded) < prompts
    # ...yet the exact figures count every turn, from the events.
    [row] = [r for r in body["data"] if r["key"] == info.id]
    assert row["turns"] == prompts
    assert row["tokens_in"] == sum(10 + n for n in range(prompts))
    assert row["tokens_out"] == 3 * prompts and row["tokens_cached"] == prompts
    assert row["cost"] == round(sum(0.001 * (n + 1) for n in range(prompts)), 6)
    assert row["errors"] == 0
    assert body["sample"] == 0.1 and "turn_p50_ms" in body["sampled"]
    [model] = [r for r in by_model["data"] if r["key"] == "default"]
    assert (model["turns"], model["cost"]) == (prompts, row["cost"])
    assert "the 10% of traces sampled" in printed
    assert printed.splitlines()[1].split()[1] == str(prompts)


async def test_a_request_span_names_the_first_route_of_the_table_that_serves_its_path(
    tmp_path: Path,
) -> None:
    import re

    from gateway import create_app
    from gateway.http._app import gateway_of
    from gateway.http._routes import quart_path
    from gateway.http._traced import Traced

    async with open_runtime(data_dir=tmp_path / "data", llm=llm.ScriptedLLM([])) as rt:
        app = create_app(rt)
        routes = gateway_of(app).routes
        traced = Traced(app, routes)

    def first(method: str, path: str) -> str:  # the table's order decides
        for route in routes:
            pattern = re.sub(r"<(\w+)>", "[^/]+", re.escape(quart_path(route.path)))
            if route.method == method and re.fullmatch(pattern, path):
                return route.path
        return "(unmatched)"

    assert len(routes) > 100
    for route in routes:
        path = re.sub(r"\{\w+\}", "ses_x1", route.path)
        assert traced._route(route.method, path) == first(route.method, path), route.path
    assert traced._route("GET", "/api/session/ses_1/no/such") == "(unmatched)"
    assert traced._route("BREW", "/api/health") == "(unmatched)"
    assert traced._route("GET", "/inspector") in ("/inspector", first("GET", "/inspector"))
