"""Session methods over ACP: list, load (the history replayed), resume, fork, close, modes
and configuration options, prompts made of several kinds of blocks, ``/command``s."""

from __future__ import annotations

import asyncio
import base64

import pytest
from acp import (
    audio_block,
    embedded_text_resource,
    image_block,
    resource_block,
    resource_link_block,
    text_block,
)
from acp.exceptions import RequestError

from tests.opencode.harness import Provider, calls, said

from .harness import Editor, Setup, agent, stderr_of

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def user_texts(body: dict) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, list):
            texts.append("".join(p.get("text", "") for p in content if p.get("type") == "text"))
        else:
            texts.append(str(content))
    return texts


def test_list_load_resume_fork_and_close(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    (setup.project / "notes.txt").write_text("kittiwake notes\n")
    provider.server.queue(
        said("One."), calls("read", {"filePath": "notes.txt"}), said("Read."), said("Again.")
    )

    async def first() -> tuple[str, str]:
        async with agent(setup, Editor()) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            for text in ("first", "read it"):
                done = await acp.conn.prompt(session_id=sid, prompt=[text_block(text)])
                assert done.stop_reason == "end_turn"
            listed = await acp.conn.list_sessions()
            [item] = listed.sessions
            assert (item.session_id, item.cwd) == (sid, str(setup.project))
            assert item.title and item.updated_at and item.updated_at.endswith("Z")
            assert (await acp.conn.list_sessions(cwd=str(tmp_path))).sessions == []
            fork = await acp.conn.fork_session(session_id=sid, cwd=str(setup.project))
            assert fork.session_id != sid and fork.modes is not None
            titles = {s.session_id: s.title for s in (await acp.conn.list_sessions()).sessions}
            assert titles[fork.session_id] == f"{titles[sid]} (fork #1)"
            assert acp.checker.problems == [] and acp.stray == []
            return sid, fork.session_id

    async def second(sid: str, forked: str) -> None:
        editor = Editor()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            await acp.conn.resume_session(session_id=sid, cwd=str(setup.project))
            await editor.until(lambda: "available_commands_update" in editor.kinds(sid))
            assert editor.kinds() == ["available_commands_update"]  # resumed: no replay
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("again")])
            assert done.stop_reason == "end_turn"
            editor.updates.clear()
            await acp.conn.load_session(session_id=sid, cwd=str(setup.project), mcp_servers=[])
            users = [u.content.text for u in editor.of("user_message_chunk")]
            assert users == ["first", "read it", "again"]
            assert [u.content.text for u in editor.of("agent_message_chunk")] == [
                "One.", "Read.", "Again."
            ]  # fmt: skip
            [read] = editor.of("tool_call")
            settled = [
                u for u in editor.of("tool_call_update") if u.tool_call_id == read.tool_call_id
            ]
            assert settled[0].title == "Read notes.txt" and settled[-1].status == "completed"
            assert "kittiwake notes" in settled[-1].content[0].content.text
            editor.updates.clear()
            await acp.conn.load_session(session_id=forked, cwd=str(setup.project), mcp_servers=[])
            assert [u.content.text for u in editor.of("user_message_chunk")] == ["first", "read it"]
            assert await acp.conn.close_session(session_id=sid) is not None
            with pytest.raises(RequestError) as closed:
                await acp.conn.close_session(session_id=sid)
            assert closed.value.code == -32002
            with pytest.raises(RequestError) as unknown:
                await acp.conn.load_session(
                    session_id="ses_nosuchsession000000000000000", cwd=str(setup.project),
                    mcp_servers=[],
                )  # fmt: skip
            assert unknown.value.code == -32002
            with pytest.raises(RequestError) as prompt_unknown:
                await acp.conn.prompt(session_id="ses_nope", prompt=[text_block("hi")])
            assert prompt_unknown.value.code in (-32002, -32602)
            assert acp.checker.problems == [] and acp.stray == []
        assert acp.process.returncode == 0, stderr_of(setup)

    sid, forked = asyncio.run(first())
    asyncio.run(second(sid, forked))
    assert user_texts(provider.server.requests[-1].json()) == ["first", "read it", "again"]


def test_modes_and_configuration_options(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    provider.server.queue(said("Planned."))

    async def scenario() -> None:
        editor = Editor()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            await acp.conn.set_session_mode(session_id=sid, mode_id="plan")
            await editor.until(lambda: "config_option_update" in editor.kinds())
            [update] = editor.of("config_option_update")
            assert {o.id: o.current_value for o in update.config_options}["mode"] == "plan"
            answer = await acp.conn.set_config_option(
                config_id="model", session_id=sid, value="local/m2"
            )
            current = {o.id: o.current_value for o in answer.config_options}
            assert current == {"mode": "plan", "model": "local/m2"}
            models = next(o for o in answer.config_options if o.id == "model")
            assert [(v.value, v.name) for v in models.options] == [
                ("local/m1", "Local: Local One"), ("local/m2", "Local: Local Two")
            ]  # fmt: skip
            for config, value in (("model", "nope/x"), ("model", "m1"), ("mode", "ghost")):
                with pytest.raises(RequestError) as refused:
                    await acp.conn.set_config_option(config_id=config, session_id=sid, value=value)
                assert refused.value.code == -32602, (config, value)
            with pytest.raises(RequestError) as unknown_mode:
                await acp.conn.set_session_mode(session_id=sid, mode_id="ghost")
            assert unknown_mode.value.code == -32602
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("plan it")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    assert provider.server.requests[-1].json()["model"] == "m2"


def test_prompt_blocks_and_commands(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    commands = setup.project / ".kittiwake" / "command"
    commands.mkdir(parents=True)
    (commands / "sum.md").write_text(
        "---\ndescription: Summarize things\nagent: plan\n---\nSummarize $ARGUMENTS\n"
    )
    notes = setup.project / "notes.txt"
    provider.server.queue(said("Seen."), said("Summed."), said("Unknown."))

    async def scenario() -> None:
        editor = Editor()
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            await editor.until(lambda: "available_commands_update" in editor.kinds())
            [offered] = editor.of("available_commands_update")
            names = {c.name: c.description for c in offered.available_commands}
            assert names["sum"] == "Summarize things" and "init" in names
            blocks = [
                text_block("look at "),
                resource_link_block("notes.txt", notes.as_uri()),
                text_block(" and "),
                resource_block(embedded_text_resource("file:///x/snippet.py", "print(1)")),
                image_block(PIXEL, "image/png"),
            ]
            assert (await acp.conn.prompt(session_id=sid, prompt=blocks)).stop_reason == "end_turn"
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("/sum the notes")])
            assert done.stop_reason == "end_turn"
            assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["plan"]
            plain = await acp.conn.prompt(session_id=sid, prompt=[text_block("/nosuch thing")])
            assert plain.stop_reason == "end_turn"
            for refused in ([audio_block(PIXEL, "audio/wav")], [text_block("  ")]):
                with pytest.raises(RequestError) as error:
                    await acp.conn.prompt(session_id=sid, prompt=refused)
                assert error.value.code == -32602
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    first, command, plain = (r.json() for r in provider.server.requests[-3:])
    [user] = [m for m in first["messages"] if m["role"] == "user"]
    text = "".join(p.get("text", "") for p in user["content"] if p["type"] == "text")
    assert text.startswith(f"look at {notes} and /x/snippet.py")
    assert '<file path="/x/snippet.py">\nprint(1)\n</file>' in text
    [image] = [p for p in user["content"] if p["type"] == "image_url"]
    assert image["image_url"]["url"] == f"data:image/png;base64,{PIXEL}"
    assert user_texts(command)[-1].startswith("Summarize the notes")
    assert user_texts(plain)[-1] == "/nosuch thing"
