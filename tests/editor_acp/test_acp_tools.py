"""Tool calls over ACP: their updates (kind, title, locations, diffs, output), permission
requests answered by the client and written as durable replies, plans, thoughts, usage."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import trio
from acp import schema as S
from acp import text_block

from runtime import open_runtime
from tests.llm.conftest import Reply
from tests.llm.streams import sse
from tests.opencode.harness import Provider, calls, said

from .harness import CONTEXT, Editor, Setup, agent, stderr_of


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1750000000,
        "model": "m1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 7} if finish else None,
    }  # fmt: skip


def thinks_then_calls(thought: str, tool: str, arguments: dict, call_id: str) -> Reply:
    """A step that reasons (in two deltas), then calls *tool*; it used 120 + 7 tokens."""
    call = {
        "index": 0, "id": call_id, "type": "function",
        "function": {"name": tool, "arguments": json.dumps(arguments)},
    }  # fmt: skip
    return Reply(
        chunks=[
            sse(chunk({"role": "assistant", "reasoning_content": thought[:4]})),
            sse(chunk({"reasoning_content": thought[4:]})),
            sse(chunk({"tool_calls": [call]})),
            sse(chunk({}, finish="tool_calls"), done=True),
        ]
    )


def permissions_of(data: Path, session_id: str) -> list:
    """The session's permission requests as the data dir holds them (opened afresh)."""

    async def read() -> list:
        async with open_runtime(data_dir=data) as rt:
            return await rt.sessions.permissions(session_id)

    return trio.run(read)


def ask_for_edits(setup: Setup) -> None:
    (setup.project / "kittiwake.json").write_text(json.dumps({"permission": {"edit": "ask"}}))


@pytest.mark.parametrize(
    ("answer", "status", "content"),
    [
        ("once", "completed", "v2\n"),
        ("always", "completed", "v2\n"),
        ("reject", "failed", "v1\n"),
        (None, "failed", "v1\n"),  # the client cancelled the request
    ],
)
def test_an_edit_asks_the_client_and_the_answer_is_a_durable_reply(
    tmp_path, provider: Provider, answer: str | None, status: str, content: str
) -> None:
    setup = Setup(tmp_path, provider)
    ask_for_edits(setup)
    notes = setup.project / "notes.txt"
    notes.write_text("v1\n")
    edit = {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}
    provider.server.queue(calls("edit", edit), said("Edited."))
    editor = Editor(permission=answer)

    async def scenario() -> str:
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("edit the notes")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []
            assert "session/request_permission" in acp.checker.methods
            return sid

    sid = asyncio.run(scenario())
    assert notes.read_text() == content, stderr_of(setup)
    [(asked_in, tool_call, options)] = editor.permissions
    assert asked_in == sid
    assert [(o.option_id, o.kind) for o in options] == [
        ("once", "allow_once"), ("always", "allow_always"), ("reject", "reject_once")
    ]  # fmt: skip
    assert tool_call.title == "Edit notes.txt" and tool_call.kind == "edit"
    [diff] = tool_call.content
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == ("diff", str(notes), "v1", "v2")
    assert [loc.path for loc in tool_call.locations] == [str(notes)]
    [start] = editor.of("tool_call")
    assert start.tool_call_id == tool_call.tool_call_id and start.kind == "edit"
    updates = [u for u in editor.of("tool_call_update") if u.tool_call_id == start.tool_call_id]
    assert updates[-1].status == status
    assert editor.text() == "Edited."
    [request] = permissions_of(setup.data, sid)
    assert request.status == (answer or "reject")
    assert request.tool == "edit"


def test_tool_updates_plans_thoughts_output_and_usage(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    todos = [
        {"content": "look around", "status": "completed", "priority": "high"},
        {"content": "say hello", "status": "in_progress", "priority": "medium"},
        {"content": "give up", "status": "cancelled", "priority": "low"},
    ]
    provider.server.queue(
        thinks_then_calls("Let me plan this.", "todowrite", {"todos": todos}, "call_plan"),
        calls("shell", {"command": "echo out; echo err >&2", "description": "says things"}),
        calls("read", {"filePath": "notes.txt", "offset": 2}, call_id="call_read"),
        said("All ", "done."),
    )
    (setup.project / "notes.txt").write_text("one\ntwo\n")
    editor = Editor()

    async def scenario() -> None:
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("go")])
            assert done.stop_reason == "end_turn"
            assert done.usage is not None  # one step of four said what it used
            assert (done.usage.input_tokens, done.usage.total_tokens) == (120, 127)
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    assert editor.text("agent_thought_chunk") == "Let me plan this."
    assert editor.text() == "All done."
    [plan] = editor.of("plan")
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("look around", "completed", "high"), ("say hello", "in_progress", "medium"),
        ("give up", "completed", "low"),
    ]  # fmt: skip
    starts = {u.tool_call_id: u for u in editor.of("tool_call")}
    shell = next(u for u in starts.values() if u.kind == "execute")
    assert starts["call_plan"].kind == "think"
    assert starts["call_read"].kind == "read"
    read_updates = [u for u in editor.of("tool_call_update") if u.tool_call_id == "call_read"]
    assert read_updates[0].title == "Read notes.txt"
    assert [(loc.path, loc.line) for loc in read_updates[0].locations] == [
        (str(setup.project / "notes.txt"), 2)
    ]
    assert "2: two" in read_updates[-1].content[0].content.text
    shell_updates = [
        u for u in editor.of("tool_call_update") if u.tool_call_id == shell.tool_call_id
    ]
    assert shell_updates[0].title == "says things" and shell_updates[0].raw_input["command"]
    assert shell_updates[-1].status == "completed"
    final = shell_updates[-1].content[0].content.text
    assert "out" in final and "err" in final and "[exit code 0]" in final
    assert shell_updates[-1].raw_output["exit_code"] == 0
    usage = editor.of("usage_update")
    assert len(usage) == 4 and {u.size for u in usage} == {CONTEXT}
    assert [u.used for u in usage] == [127, 0, 0, 0]


SUBAGENT = (
    "---\ndescription: reads carefully\nmode: subagent\npermission:\n  read: ask\n---\n"
    "Be careful.\n"
)


@pytest.mark.parametrize("attached", [False, True], ids=["in-process", "attached"])
def test_a_subagent_childs_permission_request_is_put_to_the_client(
    tmp_path, provider: Provider, attached: bool
) -> None:
    from .test_acp_attached import served

    setup = Setup(tmp_path, provider)
    (setup.project / ".kittiwake" / "agent").mkdir(parents=True)
    (setup.project / ".kittiwake" / "agent" / "reader.md").write_text(SUBAGENT)
    (setup.project / "notes.txt").write_text("kittiwake notes\n")
    task = {"description": "read notes", "prompt": "read notes.txt", "subagent_type": "reader"}
    provider.server.queue(
        calls("task", task),
        calls("read", {"filePath": "notes.txt"}, call_id="call_child"),
        said("the notes say kittiwake"),
        said("Done."),
    )
    editor = Editor(permission="once")

    async def scenario(*args: str) -> None:
        async with agent(setup, editor, *args) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("delegate")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []
            [(asked_in, tool_call, _)] = editor.permissions
            assert asked_in == sid and tool_call.tool_call_id == "call_child"
            assert tool_call.title == "reader: read notes.txt"

    if attached:
        with served(setup) as url:
            asyncio.run(scenario("--attach", url))
    else:
        asyncio.run(scenario())
    assert editor.text() == "Done."
    child_result = [
        m for m in provider.server.requests[2].json()["messages"] if m["role"] == "tool"
    ]
    assert "kittiwake notes" in str(child_result)


COLOR = {
    "question": "Which color?", "header": "Color",
    "options": [{"label": "Red", "description": "warm"},
                {"label": "Blue", "description": "cool"}],
}  # fmt: skip


def tool_results(provider: Provider) -> list[dict]:
    messages = provider.server.requests[-1].json()["messages"]
    return [json.loads(m["content"]) for m in messages if m["role"] == "tool"]


def test_questions_are_put_as_permission_requests_with_their_choices(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    several = {**COLOR, "multiple": True}
    provider.server.queue(
        calls("plan_enter", {}, call_id="call_plan"),
        calls("question", {"questions": [COLOR]}, call_id="call_color"),
        calls("question", {"questions": [several]}, call_id="call_several"),
        calls("question", {"questions": [several]}, call_id="call_dismissed"),
        said("Planned."),
    )
    editor = Editor()
    # "No" to the switch, "Blue", then "Red" and "Done" for the several, then "Dismiss"
    editor.answers = ["1", "1", "0", "done", "dismiss"]

    async def scenario() -> None:
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("plan it")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    switch, pick, first, more, dismissed = editor.permissions
    assert switch[1].tool_call_id == "call_plan" and switch[1].title.startswith("Would you")
    assert [(o.option_id, o.name) for o in switch[2]] == [
        ("0", "Yes"), ("1", "No"), ("dismiss", "Dismiss")
    ]  # fmt: skip
    assert pick[1].title == "Which color?"
    assert pick[1].content[0].content.text == "Red: warm\nBlue: cool"
    assert [o.option_id for o in first[2]] == ["0", "1", "dismiss"]  # "Done" once one is chosen
    assert more[1].title == "Which color? (chosen: Red)"
    assert [(o.option_id, o.name) for o in more[2]] == [
        ("1", "Blue"), ("done", "Done"), ("dismiss", "Dismiss")
    ]  # fmt: skip
    assert dismissed[1].tool_call_id == "call_dismissed"
    results = tool_results(provider)
    assert results[1]["structured"] == {"answers": [["Blue"]]}
    assert results[2]["structured"] == {"answers": [["Red"]]}
    assert "dismissed" in json.dumps(results[3]).lower(), results[3]


def test_questions_are_one_form_when_the_client_renders_forms(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    several = {**COLOR, "question": "Which colors?", "multiple": True}
    typed = {"question": "Your name?", "header": "Name", "options": []}
    provider.server.queue(
        calls("question", {"questions": [COLOR, several, typed]}, call_id="call_form"),
        calls("question", {"questions": [COLOR]}, call_id="call_declined"),
        said("Asked."),
    )
    editor = Editor()
    answered = {"q0": "Blue", "q1": ["Red", "Blue"], "q2": "Ada"}
    forms = S.ClientCapabilities(elicitation=S.ElicitationCapabilities(form={}))

    editor.elicited = [S.AcceptElicitationResponse(action="accept", content=answered)]

    async def scenario() -> None:
        async with agent(setup, editor, unstable=True) as acp:
            await acp.conn.initialize(protocol_version=1, client_capabilities=forms)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("ask me")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []
            assert "elicitation/create" in acp.checker.methods

    asyncio.run(scenario())
    assert editor.permissions == []
    (message, form), (_, declined) = editor.forms
    assert message == "Color\nColor\nName"
    assert form.tool_call_id == "call_form" and declined.tool_call_id == "call_declined"
    fields = form.requested_schema.properties
    assert (
        fields["q0"].one_of[1].const == "Blue"
        and fields["q0"].description == "Red: warm\nBlue: cool"
    )
    assert [o.const for o in fields["q1"].items.any_of] == ["Red", "Blue"]
    assert fields["q2"].type == "string" and form.requested_schema.required == ["q0", "q1", "q2"]
    results = tool_results(provider)
    assert results[0]["structured"] == {"answers": [["Blue"], ["Red", "Blue"], ["Ada"]]}
    assert "dismissed" in json.dumps(results[1]).lower(), results[1]


def test_a_plan_switch_answered_yes_changes_the_mode(tmp_path, provider: Provider) -> None:
    setup = Setup(tmp_path, provider)
    provider.server.queue(calls("plan_enter", {}, call_id="call_plan"), said("Planning."))
    editor = Editor(permission="0")  # "Yes"

    async def scenario() -> None:
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            done = await acp.conn.prompt(session_id=sid, prompt=[text_block("plan it")])
            assert done.stop_reason == "end_turn"
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())
    assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["plan"]
    options = editor.of("config_option_update")[-1].config_options
    assert {o.id: o.current_value for o in options}["mode"] == "plan"


def test_edits_show_the_whole_file_once_its_content_before_is_recorded(
    tmp_path, provider: Provider
) -> None:
    setup = Setup(tmp_path, provider)
    notes = setup.project / "notes.txt"
    notes.write_text("one\ntwo\nthree\n")
    (setup.project / "old.txt").write_text("was here\n")
    edit = {"filePath": "notes.txt", "oldString": "two", "newString": "2"}
    write = {"filePath": "old.txt", "content": "replaced\n"}
    provider.server.queue(
        calls("edit", edit, call_id="call_edit"), calls("write", write, call_id="call_write"),
        said("Done."),
    )  # fmt: skip
    editor = Editor()

    async def scenario() -> None:
        async with agent(setup, editor) as acp:
            await acp.conn.initialize(protocol_version=1)
            sid = (await acp.conn.new_session(cwd=str(setup.project), mcp_servers=[])).session_id
            await acp.conn.prompt(session_id=sid, prompt=[text_block("edit")])
            assert acp.checker.problems == [] and acp.stray == []

    asyncio.run(scenario())

    def last_diff(call_id: str) -> tuple:
        shown = [u for u in editor.of("tool_call_update") if u.tool_call_id == call_id]
        [diff] = [c for c in shown[-1].content if c.type == "diff"]
        return diff.path, diff.old_text, diff.new_text

    assert last_diff("call_edit") == (str(notes), "one\ntwo\nthree\n", "one\n2\nthree\n")
    assert last_diff("call_write") == (str(setup.project / "old.txt"), "was here\n", "replaced\n")
