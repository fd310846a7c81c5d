"""``kittiwake run`` with the session tools: a question answered on the terminal, todos shown."""

from __future__ import annotations

import json
import os
import subprocess

import trio

from tests.llm.conftest import LocalServer, Reply
from tests.llm.streams import sse

from .test_cli_run import Cli, chunk, said
from .test_cli_run import provider as provider  # the fixture

COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
}


def calls(call_id: str, name: str, arguments: dict) -> Reply:
    call = {
        "index": 0, "id": call_id, "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }  # fmt: skip
    return Reply(chunks=[sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls"))])


async def test_run_answers_a_question_on_the_terminal_and_shows_todos(
    tmp_path, provider: LocalServer
) -> None:
    cli = Cli(tmp_path, provider)
    todos = [{"content": "pick a color", "status": "in_progress", "priority": "high"}]
    provider.queue(
        calls("call_1", "todowrite", {"todos": todos}),
        calls("call_2", "question", {"questions": [COLOR]}),
        said("blue then"),
    )
    master, slave = os.openpty()
    try:
        proc = await trio.lowlevel.open_process(
            cli.argv("run", "choose", "a", "color"), stdin=slave, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=cli.project, env=cli.env, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        assert proc.stderr is not None and proc.stdout is not None
        err = b""
        with trio.fail_after(30):
            while b"empty line to dismiss" not in err:
                data = await proc.stderr.receive_some(4096)
                assert data, err.decode()
                err += data
        assert "[Color] Which color?" in err.decode() and "2. Blue: cool" in err.decode()
        assert len(provider.requests) == 2  # the question waits for the answer
        os.write(master, b"2\n")
        out = b""
        with trio.fail_after(30):
            while data := await proc.stdout.receive_some(4096):
                out += data
            while data := await proc.stderr.receive_some(4096):
                err += data
            await proc.wait()
    finally:
        os.close(master)
    assert proc.returncode == 0, err.decode()
    assert out.decode() == "blue then\n"
    assert "[>] pick a color" in err.decode()
    tool_result = [m for m in provider.requests[2].json()["messages"] if m["role"] == "tool"]
    assert json.loads(tool_result[-1]["content"])["structured"] == {"answers": [["Blue"]]}


SUBAGENT = (
    "---\ndescription: reads carefully\nmode: subagent\npermission:\n  read: ask\n---\n"
    "Be careful.\n"
)


async def test_run_answers_the_permission_request_of_a_subagent_child(
    tmp_path, provider: LocalServer
) -> None:
    cli = Cli(tmp_path, provider)
    (cli.project / ".kittiwake" / "agent").mkdir(parents=True)
    (cli.project / ".kittiwake" / "agent" / "reader.md").write_text(SUBAGENT)
    (cli.project / "notes.txt").write_text("kittiwake notes\n")
    task = {"description": "read notes", "prompt": "read notes.txt", "subagent_type": "reader"}
    provider.queue(
        calls("call_1", "task", task),
        calls("call_2", "read", {"filePath": "notes.txt"}),
        said("the notes say kittiwake"),
        said("done"),
    )
    master, slave = os.openpty()
    try:
        proc = await trio.lowlevel.open_process(
            cli.argv("run", "delegate"), stdin=slave, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=cli.project, env=cli.env, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        assert proc.stderr is not None and proc.stdout is not None
        err = b""
        with trio.fail_after(30):
            while b"[o]nce, [a]lways, [r]eject" not in err:
                data = await proc.stderr.receive_some(4096)
                assert data, err.decode()
                err += data
        assert len(provider.requests) == 2  # the child's read waits for the answer
        os.write(master, b"o\n")
        out = b""
        with trio.fail_after(30):
            while data := await proc.stdout.receive_some(4096):
                out += data
            while data := await proc.stderr.receive_some(4096):
                err += data
            await proc.wait()
    finally:
        os.close(master)
    assert proc.returncode == 0, err.decode()
    assert out.decode() == "done\n"
    child_result = [m for m in provider.requests[2].json()["messages"] if m["role"] == "tool"]
    assert "kittiwake notes" in str(child_result)
    parent_result = [m for m in provider.requests[3].json()["messages"] if m["role"] == "tool"]
    assert "the notes say kittiwake" in str(parent_result)


async def test_run_command_expands_arguments_and_files(tmp_path, provider: LocalServer) -> None:
    cli = Cli(tmp_path, provider)
    (cli.project / ".kittiwake" / "command").mkdir(parents=True)
    (cli.project / ".kittiwake" / "command" / "sum.md").write_text(
        "---\ndescription: Summarize\n---\nSummarize $ARGUMENTS from @notes.txt\n"
    )
    (cli.project / "notes.txt").write_text("kittiwake notes\n")
    provider.queue(said("summarized"))
    done = await cli("run", "--command", "sum", "the", "notes")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "summarized\n"
    [user] = [m for m in provider.requests[0].json()["messages"] if m["role"] == "user"]
    text = str(user["content"])
    assert "Summarize the notes from @notes.txt" in text and "kittiwake notes" in text


async def test_run_shows_the_diff_of_each_file_tool(tmp_path, provider: LocalServer) -> None:
    cli = Cli(tmp_path, provider)
    (cli.project / "notes.txt").write_text("v1\nkept\n")
    provider.queue(
        calls("call_1", "edit", {"filePath": "notes.txt", "oldString": "v1", "newString": "v2"}),
        calls("call_2", "write", {"filePath": "new.txt", "content": "fresh\n"}),
        said("changed"),
    )
    done = await cli("run", "change", "the", "notes")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "changed\n"
    err = done.stderr.decode().splitlines()
    edit = err.index("✓ edit notes.txt")
    assert err[edit + 1 : edit + 7] == [
        "  --- a/notes.txt", "  +++ b/notes.txt", "  @@ -1,2 +1,2 @@", "  -v1", "  +v2", "   kept",
    ]  # fmt: skip
    write = err.index("✓ write new.txt")  # from the file's recorded previous content: none
    assert err[write + 1 : write + 5] == [
        "  --- a/new.txt", "  +++ b/new.txt", "  @@ -0,0 +1 @@", "  +fresh",
    ]  # fmt: skip
