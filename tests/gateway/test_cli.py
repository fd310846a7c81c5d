"""The ``kittiwake`` command in real subprocesses, and the operator routes it uses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from gateway.cli._main import default_data_dir
from gateway.cli._stats import render_tree
from tests.waiting import serving_url

from .conftest import served

ROOT = Path(__file__).resolve().parents[2]


async def kittiwake(*args: str, env: dict[str, str] | None = None) -> trio.CompletedProcess[bytes]:
    with trio.fail_after(30):
        return await trio.run_process(
            [sys.executable, "-m", "gateway", *args],
            stdin=b"", capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT,
            env=env if env is not None else {**os.environ, "KITTIWAKE_SERVER_PASSWORD": ""},
        )  # fmt: skip


async def test_run_attached_streams_the_answer(tmp_path):
    async with served(tmp_path) as g:
        done = await kittiwake("run", "--attach", g.url, "say", "hello")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == "answer 1\n"
        listed = await kittiwake("sessions", "list", "--attach", g.url)
        sid = done.stderr.decode().split("session ")[-1].strip()
        assert sid in listed.stdout.decode()
        shown = await kittiwake("sessions", "show", sid, "--attach", g.url)
        assert "say hello" in shown.stdout.decode() and "answer 1" in shown.stdout.decode()
        tree = await kittiwake("inspect", "--attach", g.url)
        assert "storage [storage] running" in tree.stdout.decode()
        deleted = await kittiwake("sessions", "delete", sid, "--attach", g.url)
        assert deleted.returncode == 0, deleted.stderr.decode()
        assert deleted.stdout.decode() == f"deleted {sid}\n"
        assert sid not in (await kittiwake("sessions", "list", "--attach", g.url)).stdout.decode()
        again = await kittiwake("sessions", "delete", sid, "--attach", g.url)
        assert again.returncode == 1 and "SessionNotFoundError" in again.stderr.decode()


async def test_run_without_provider_explains_and_fails(tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "KITTIWAKE_DATA_DIR": str(tmp_path / "d"),
    }
    done = await kittiwake("run", "hello", env=env)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "no LLM provider is configured" in err
    assert "ANTHROPIC_API_KEY" in err and "OPENAI_API_KEY" in err
    assert "No LLM provider is configured" in err  # the failed step's own message


async def test_unreachable_server_is_reported(tmp_path):
    done = await kittiwake("sessions", "list", "--attach", "http://127.0.0.1:9")
    assert done.returncode == 2
    assert "cannot reach the server" in done.stderr.decode()


def test_default_data_dir_order(tmp_path):
    assert default_data_dir({"KITTIWAKE_DATA_DIR": "/a", "XDG_DATA_HOME": "/b"}) == Path("/a")
    assert default_data_dir({"XDG_DATA_HOME": "/b"}) == Path("/b/kittiwake")
    assert default_data_dir({}) == Path.home() / ".local/share/kittiwake"


async def test_actors_inspector_and_cors(tmp_path):
    async with (
        served(tmp_path, cors_origins=["http://ok.example"]) as g,
        httpx.AsyncClient(base_url=g.url) as client,
    ):
        snapshot = (await client.get("/api/actors")).json()
        ids = {node["statistics"]["id"] for node in snapshot["tree"]}
        assert "storage" in ids
        assert snapshot["storage"]["batches"] >= 0 and "file_bytes" in snapshot["storage"]
        assert "storage [storage] running" in render_tree(snapshot)
        page = await client.get("/inspector")
        assert page.status_code == 200 and "api/inspector/state" in page.text
        allowed = await client.get("/api/health", headers={"Origin": "http://ok.example"})
        assert allowed.headers["access-control-allow-origin"] == "http://ok.example"
        other = await client.get("/api/health", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
    async with served(tmp_path / "b") as g, httpx.AsyncClient(base_url=g.url) as client:
        plain = await client.get("/api/health", headers={"Origin": "http://ok.example"})
        assert "access-control-allow-origin" not in plain.headers
        missing = await client.get("/api/nothing")
        assert missing.status_code == 404 and missing.json()["_tag"] == "NotFoundError"


async def test_serving_without_a_provider_does_not_import_an_http_client():
    # Start-up time: httpx (with rich and pygments behind it) loads only when a provider or
    # an HTTP-talking command needs it; `kittiwake --attach` commands skip the web framework.
    probe = "import sys, gateway.cli, gateway.http._serve; print('httpx' in sys.modules)"
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", probe], capture_stdout=True, check=True, cwd=ROOT
        )
    assert done.stdout.decode().split() == ["False"]
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", "import sys, gateway.cli; print('quart' in sys.modules)"],
            capture_stdout=True, check=True, cwd=ROOT,
        )  # fmt: skip
    assert done.stdout.decode().split() == ["False"]


async def test_serving_from_duckdb_does_not_import_what_only_a_feature_needs():
    # Idle memory and start-up: psycopg loads only for --store postgresql, OpenTelemetry's
    # OTLP exporter only with an endpoint, html-to-markdown only when webfetch runs and the
    # LSP types only when a language server starts, PyYAML only when a file has front matter.
    optional = ["psycopg", "opentelemetry.exporter", "html_to_markdown", "lsprotocol", "yaml"]
    probe = (
        "import sys, gateway.cli, gateway._gateway, gateway.http._serve, actors, storage; "
        f"print(*[m for m in {optional!r} if m in sys.modules])"
    )
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", probe], capture_stdout=True, check=True, cwd=ROOT
        )
    assert done.stdout.decode().split() == []


_FEATURE_ONLY = (
    "getpass", "html_to_markdown", "httpx", "lsprotocol", "opentelemetry.exporter",
    "opentelemetry.sdk.trace.export", "psycopg", "xml", "yaml", "mcp", "webbrowser",
    "gateway.acp", "gateway.slack", "gateway.github", "gateway.cli._acp", "gateway.cli._slack",
    "gateway.cli._terminal", "gateway.cli._sessions", "gateway.cli._tokens", "gateway.cli._login",
    "gateway.opencode._tui", "kittiwake_sdk", "pluggy", "runtime.plugins._spec",
)  # fmt: skip
"""What a serving process imports only for a feature it was not asked for: the HTTP client
(a provider), the exporters (an OTLP endpoint), PostgreSQL (``--store``), the web and LSP
tools' libraries, PyYAML (front matter), getpass (``auth login``), the MCP SDK (a Location
starting an MCP server), the browser launcher (``kittiwake web``, an MCP sign-in), the ACP,
Slack and GitHub rooms and the client commands' modules (``run``, ``sessions``, ``token``,
``auth login``, ``tui``, the Python SDK), pluggy and the plugins' hook specifications (a
Location's first plugin); nothing escapes XML with ``xml.sax``."""


_TELEMETRY_ONLY = ("opentelemetry.sdk", "runtime._recorded", "storage._telemetry")
"""What a serving process imports only with telemetry on: OpenTelemetry's SDK, the
recording side of the tracer and the telemetry tables."""


@pytest.mark.parametrize("telemetry", [True, False], ids=["telemetry", "no-telemetry"])
async def test_a_serving_process_imports_feature_modules_only_when_used(tmp_path, telemetry):
    # The import-time probes above miss what start-up and requests import later: this is
    # `kittiwake serve` itself (DuckDB, no provider), asked for its health, a session, a
    # prompt (its turn fails: no provider) and OpenCode's session list, then stopped.
    listing = tmp_path / "modules.txt"
    probe = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write(' '.join(sys.modules)))\n"
        "from gateway.__main__ import main\n"
        "sys.argv = ['kittiwake', 'serve', '--port', '0']\n"
        "raise SystemExit(main())\n"
    )
    project = tmp_path / "project"
    project.mkdir()
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "KITTIWAKE_SERVER_PASSWORD": "",
        "KITTIWAKE_DATA_DIR": str(tmp_path / "data"),
    }  # fmt: skip
    if not telemetry:
        env["KITTIWAKE_CONFIG_CONTENT"] = '{"telemetry": {"enabled": false}}'
    server = await trio.lowlevel.open_process(
        [sys.executable, "-c", probe], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd=project, env=env,
    )  # fmt: skip
    try:
        url = await serving_url(server)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await client.get("/api/health")).status_code == 200
            sid = (await client.post("/api/session", json={})).json()["data"]["id"]
            prompt = {"prompt": {"text": "hi"}}
            assert (await client.post(f"/api/session/{sid}/prompt", json=prompt)).is_success
            assert (await client.post(f"/api/session/{sid}/wait")).is_success
            assert sid in (await client.get("/session")).text
    finally:
        server.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            await server.wait()
    loaded = set(listing.read_text().split())
    assert "gateway.http._serve" in loaded and "runtime.telemetry" in loaded
    assert [m for m in _FEATURE_ONLY if m in loaded] == []
    assert [m for m in _TELEMETRY_ONLY if m in loaded] == ([*_TELEMETRY_ONLY] if telemetry else [])
