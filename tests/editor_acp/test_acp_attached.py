"""``kittiwake acp --attach URL`` drives a running ``kittiwake serve`` over its HTTP API and
websocket, and ``kittiwake acp`` attaches by itself to the server holding the data dir."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator

from acp import text_block

from tests.opencode.harness import Provider, calls, said

from .harness import Editor, Setup, agent, stderr_of
from .test_acp_durability import hangs_after


@contextlib.contextmanager
def served(setup: Setup) -> Iterator[str]:
    """``kittiwake serve`` on a free port over the setup's data dir; its URL."""
    log = (setup.tmp / "serve.err").open("ab")
    server = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", "0"], cwd=setup.project,
        env=setup.env, stdout=subprocess.PIPE, stderr=log,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()  # the first line says where it serves
        found = re.search(r"serving (http://\S+)", line)
        assert found is not None, line + (setup.tmp / "serve.err").read_text()
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(30)
        if server.stdout is not None:
            server.stdout.close()
        log.close()


def test_attached_prompt_tool_permission_cancel_and_load(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    (setup.project / "kittiwake.json").write_text(json.dumps({"permission": {"edit": "ask"}}))
    notes = setup.project / "notes.txt"
    notes.write_text("v1\n")
    edit = {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}
    provider.server.queue(
        calls("edit", edit), said("Edited ", "it."), hangs_after("Long "), said("Short.")
    )

    async def first(url: str) -> str:
        editor = Editor(permission="once")
        async with agent(setup, editor, "--attach", url) as acp:
            await acp.conn.initialize(protocol_version=1)
            new = await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])
            sid = new.session_id
            assert {o.id: o.current_value for o in new.config_options}["model"] == "local/m1"
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("edit the notes")])
            assert done.stop_reason == "end_turn"
            assert editor.text() == "Edited it."
            [(_, tool_call, _)] = editor.permissions
            assert tool_call.title == "Edit notes.txt" and tool_call.content[0].type == "diff"
            [call] = editor.of("tool_call")
            last = [u for u in editor.of("tool_call_update") if u.tool_call_id == call.tool_call_id]
            assert last[-1].status == "completed"
            prompt = asyncio.create_task(
                acp.conn.prompt(session_id=sid, prompt=[text_block("say a lot")])
            )
            await editor.until(lambda: editor.text().endswith("Long "))
            await acp.conn.cancel(session_id=sid)
            assert (await prompt).stop_reason == "cancelled"
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)
        return sid

    async def second(sid: str) -> None:
        editor = Editor()
        async with agent(setup, editor) as acp:  # no --attach: the server holding the data dir
            await acp.conn.initialize(protocol_version=1)
            await acp.conn.load_session(session_id=sid, cwd=str(setup.project), mcp_servers=[])
            users = [u.content.text for u in editor.of("user_message_chunk")]
            assert users == ["edit the notes", "say a lot"]
            assert editor.text() == "Edited it.Long "
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("briefly")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)

    with served(setup) as url:
        sid = asyncio.run(first(url))
        asyncio.run(second(sid))
    assert notes.read_text() == "v2\n"
    assert f"attaching to the kittiwake serve on {url}" in stderr_of(setup)


def test_a_second_agent_on_the_data_dir_drives_the_first_ones_runtime(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    provider.server.queue(said("From ", "the second."))

    async def scenario() -> None:
        first_editor, second_editor = Editor(), Editor()
        async with agent(setup, first_editor) as first:
            await first.conn.initialize(protocol_version=1)
            sid = (await first.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            async with agent(setup, second_editor) as second:  # an editor's second window
                await second.conn.initialize(protocol_version=1)
                listed = await second.conn.list_sessions()
                assert [s.session_id for s in listed.sessions] == [sid]
                done = await second.conn.prompt(session_id=sid, prompt=[text_block("hello")])
                assert done.stop_reason == "end_turn"
                assert second_editor.text() == "From the second."
                assert second.checker.problems == [] and second.stray == []
            assert second.process.returncode == 0, stderr_of(setup)
            await first.conn.load_session(session_id=sid, cwd=str(setup.project), mcp_servers=[])
            assert first_editor.text() == "From the second."
            assert first.checker.problems == [] and first.stray == []
        assert first.process.returncode == 0, stderr_of(setup)

    asyncio.run(scenario())
    assert "attaching to the kittiwake serve on http://127.0.0.1:" in stderr_of(setup)
    assert not (setup.data / "serving.json").exists()  # forgotten when the first one ended


def test_load_leaves_out_what_a_revert_hides(tmp_path, provider: Provider) -> None:
    import httpx

    setup = Setup(tmp_path, provider)
    provider.server.queue(said("One."), said("Two."))

    async def prompts(url: str) -> str:
        async with agent(setup, Editor(), "--attach", url) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            for text in ("first", "second"):
                await acp.conn.prompt(session_id=sid, prompt=[text_block(text)])
            return sid

    async def load(url: str, sid: str) -> Editor:
        editor = Editor()
        async with agent(setup, editor, "--attach", url) as acp:
            await acp.conn.initialize(protocol_version=1)
            await acp.conn.load_session(session_id=sid, cwd=str(setup.project), mcp_servers=[])
            assert acp.checker.problems == [] and acp.stray == []
        return editor

    with served(setup) as url:
        sid = asyncio.run(prompts(url))
        page = httpx.get(f"{url}/api/session/{sid}/message", params={"order": "asc"}).json()
        second = [m["id"] for m in page["data"] if m.get("text") == "second"]
        reverted = httpx.post(f"{url}/session/{sid}/revert", json={"messageID": second[0]})
        assert reverted.status_code == 200, reverted.text
        editor = asyncio.run(load(url, sid))
    assert [u.content.text for u in editor.of("user_message_chunk")] == ["first"]
    assert editor.text() == "One."


def test_a_session_loaded_while_it_runs_is_followed_to_its_end(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    (setup.project / "kittiwake.json").write_text(json.dumps({"permission": {"edit": "ask"}}))
    notes = setup.project / "notes.txt"
    notes.write_text("v1\n")
    first = {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}
    second = {"filePath": "notes.txt", "oldString": "v2", "newString": "v3"}
    provider.server.queue(
        calls("edit", first, call_id="call_1"), calls("edit", second, call_id="call_2"),
        said("Both ", "edited."),
    )  # fmt: skip

    async def scenario() -> None:
        window_a, window_b = Editor(), Editor()
        window_a.holds = [asyncio.Event(), asyncio.Event()]
        async with agent(setup, window_a) as a:
            await a.conn.initialize(protocol_version=1)
            sid = (await a.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            prompt = asyncio.create_task(
                a.conn.prompt(session_id=sid, prompt=[text_block("edit twice")])
            )
            await window_a.until(lambda: len(window_a.permissions) == 1)
            async with agent(setup, window_b) as b:  # the run waits on window A's answer
                await b.conn.initialize(protocol_version=1)
                await b.conn.load_session(session_id=sid, cwd=str(setup.project), mcp_servers=[])
                assert [u.content.text for u in window_b.of("user_message_chunk")] == ["edit twice"]
                window_a.holds[0].set()  # the run goes on: window B follows it
                await window_b.until(lambda: window_b.text() == "Both edited.")
                [(asked_in, call, _)] = window_b.permissions  # the second edit, asked here
                assert asked_in == sid and call.tool_call_id == "call_2"
                settled = [u for u in window_b.of("tool_call_update") if u.status == "completed"]
                assert {u.tool_call_id for u in settled} == {"call_1", "call_2"}
                assert b.checker.problems == [] and b.stray == []
            assert (await prompt).stop_reason == "end_turn"
            window_a.holds[1].set()
            assert a.checker.problems == [] and a.stray == []

    asyncio.run(scenario())
    assert notes.read_text() == "v3\n"
