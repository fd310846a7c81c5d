"""The single-file executable (``make dist``: ``dist/kittiwake``) run with an empty
environment, no virtualenv or Python on PATH: it serves, and answers a prompt through a local
server speaking OpenAI's chat-completions SSE as the provider (planted in the data dir's
catalog, a provider that needs no key). Run by ``make dist-test``, not by ``make test``: the
file takes minutes to build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import kittiwake_sdk as sdk
import pytest
import trio

from tests.gateway.test_cli_run import catalog, said
from tests.llm.conftest import LocalServer
from tests.waiting import serving_url

EXECUTABLE = Path(os.environ.get("KITTIWAKE_EXECUTABLE", "dist/kittiwake")).resolve()


@pytest.fixture
async def provider(nursery: trio.Nursery) -> LocalServer:
    srv = LocalServer()
    listeners = await nursery.start(trio.serve_tcp, srv.handle, 0)
    srv.port = listeners[0].socket.getsockname()[1]
    return srv


async def test_the_executable_serves_and_answers_with_an_empty_environment(
    tmp_path: Path, provider: LocalServer
) -> None:
    assert EXECUTABLE.is_file(), f"{EXECUTABLE} is missing: run `make dist`"
    data, project = tmp_path / "data", tmp_path / "project"
    data.mkdir()
    project.mkdir()
    keyless = catalog(provider.base_url)
    keyless["local"]["env"] = []
    (data / "models-dev.json").write_text(json.dumps(keyless))
    provider.queue(said("served by one file"), said("and run by it"))

    command = [str(EXECUTABLE), "serve", "--port", "0", "--data-dir", str(data)]
    server = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, env={}, cwd=project)
    try:
        url = await serving_url(server)
        async with sdk.AsyncClient(url, timeout=60) as client:
            sid = (await client.session_create()).id
            await client.session_prompt(sid, prompt=sdk.Prompt(text="hello"))
            await client.session_wait(sid)
            *_, last = await client.session_context(sid)
            assert isinstance(last, sdk.AssistantMessage)
            texts = [c.text for c in last.content if isinstance(c, sdk.AssistantText)]
            assert texts == ["served by one file"]
        with trio.fail_after(120):
            run = await trio.run_process(
                [str(EXECUTABLE), "run", "--attach", url, "again"], env={}, cwd=project,
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
        assert run.returncode == 0, run.stderr.decode()
        assert run.stdout.decode() == "and run by it\n"
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/")).status_code == 200  # the web app's files are bundled
    finally:
        server.send_signal(signal.SIGINT)
        with trio.fail_after(60):
            await server.wait()
