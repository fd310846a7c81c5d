"""Language servers through a whole drain and ``GET /lsp`` on a served runtime."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import httpx
import trio

from actors import Configuration
from gateway import Server, serve
from runtime import Location, open_runtime
from runtime.llm import ScriptedLLM, TextPart, ToolMessage
from tests.execution.conftest import answer, prompt, tool_calls
from tests.gateway.conftest import assert_valid, response_schema


def _tool_text(request) -> str:
    result = [x for x in request.messages if isinstance(x, ToolMessage)][-1].content[0]
    return "".join(p.text for p in result.content if isinstance(p, TextPart))


async def test_an_edit_in_a_drain_gets_diagnostics_and_lsp_reports_the_server(tmp_path: Path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "app.py").write_text("import os\n\nprint(os.getcwd())\n")
    config = {
        "lsp": {"python": {"command": [sys.executable, "-m", "pylsp"], "extensions": [".py"]}},
        "language_servers": {"diagnostics_timeout": 10},
    }
    (work / "kittiwake.json").write_text(json.dumps(config))
    edit = {"filePath": "app.py", "oldString": "os.getcwd()", "newString": "sys.argv"}
    client = ScriptedLLM([tool_calls(("e", "edit", edit)), answer("done")])
    configuration = Configuration(env={"HOME": str(tmp_path)})
    async with open_runtime(
        data_dir=tmp_path / "data", llm=client, configuration=configuration
    ) as rt:
        async with trio.open_nursery() as nursery:
            server: Server = await nursery.start(
                partial(serve, rt, "127.0.0.1", 0, directory=tmp_path)
            )
            async with httpx.AsyncClient(base_url=server.url) as http:
                before = await http.get("/lsp", params={"directory": "project"})
                info = await rt.sessions.create(location=Location(directory=str(work)))
                await rt.sessions.prompt(info.id, prompt=prompt("use sys"))
                await rt.sessions.wait_idle(info.id)
                after = await http.get("/lsp", params={"directory": "project"})
                bad = await http.get("/lsp", params={"directory": "missing"})
            server.stop()
    assert before.status_code == 200 and before.json() == []
    text = _tool_text(client.requests[1])
    assert text.startswith("Edited app.py: 1 replacement(s)")
    assert "ERROR [3:7] undefined name 'sys' (pyflakes)" in text
    assert after.status_code == 200
    assert_valid(after.json(), response_schema("/lsp", "get", 200))
    assert after.json() == [
        {"id": "python", "name": "python", "root": str(work), "status": "connected"}
    ]
    assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"
