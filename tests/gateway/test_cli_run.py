"""``kittiwake run`` and start-up failures in real subprocesses, with a local HTTP server
speaking OpenAI's chat-completions SSE as the provider (planted in the data dir's catalog)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from tests.llm.conftest import LocalServer, Reply
from tests.llm.streams import sse
from tests.waiting import serving_url

ROOT = Path(__file__).resolve().parents[2]
SESSION = re.compile(r"ses_[0-9A-Za-z]+")


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1750000000,
        "model": "m1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }  # fmt: skip


def said(text: str) -> Reply:
    """One provider answer streaming *text* in two deltas."""
    half = len(text) // 2
    body = sse(
        chunk({"role": "assistant", "content": text[:half]}),
        chunk({"content": text[half:]}),
        chunk({}, finish="stop"),
        done=True,
    )
    return Reply(chunks=[body])


def calls_read(path: str) -> Reply:
    call = {
        "index": 0, "id": "call_1", "type": "function",
        "function": {"name": "read", "arguments": json.dumps({"filePath": path})},
    }  # fmt: skip
    return Reply(chunks=[sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls"))])


def catalog(base_url: str) -> dict:
    model = {"id": "m1", "name": "Local One", "tool_call": True, "limit": {"context": 8000}}
    return {
        "local": {
            "id": "local", "name": "Local", "npm": "@ai-sdk/openai-compatible",
            "api": base_url, "env": ["LOCAL_API_KEY"], "models": {"m1": model},
        }
    }  # fmt: skip


class Cli:
    """Runs ``python -m gateway`` with a data dir whose catalog has the local provider."""

    def __init__(self, tmp: Path, provider: LocalServer | None) -> None:
        self.data = tmp / "data"
        self.provider = provider
        self.project = tmp / "project"
        self.project.mkdir()
        self.env = {**os.environ, "HOME": str(tmp), "KITTIWAKE_DATA_DIR": str(self.data)}
        for name in ("KITTIWAKE_SERVER_PASSWORD", "KITTIWAKE_MODEL"):
            self.env.pop(name, None)
        if provider is not None:
            self.data.mkdir()
            (self.data / "models-dev.json").write_text(json.dumps(catalog(provider.base_url)))
            self.env["LOCAL_API_KEY"] = "sk-local"

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "gateway", *args]

    async def __call__(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        with trio.fail_after(60):
            return await trio.run_process(
                self.argv(*args), stdin=stdin, capture_stdout=True, capture_stderr=True,
                check=False, cwd=self.project, env=self.env,
            )  # fmt: skip


@pytest.fixture
async def provider(nursery: trio.Nursery) -> LocalServer:
    srv = LocalServer()
    listeners = await nursery.start(trio.serve_tcp, srv.handle, 0)
    srv.port = listeners[0].socket.getsockname()[1]
    return srv


def session_of(stderr: bytes) -> str:
    found = SESSION.findall(stderr.decode())
    assert found, stderr.decode()
    return found[-1]


def assert_in_order(kinds: list[str]) -> None:
    """The events of one answered prompt in the order the session wrote them: the prompt's
    promotion, then the step, then its text's start, deltas and end."""
    deltas = [i for i, kind in enumerate(kinds) if kind == "session.next.text.delta"]
    assert deltas, kinds
    before = ["prompt.promoted", "step.started", "text.started"]
    assert [kinds.index(f"session.next.{kind}") for kind in before] == sorted(
        kinds.index(f"session.next.{kind}") for kind in before
    ), kinds
    assert kinds.index("session.next.text.started") < deltas[0], kinds
    assert deltas[-1] < kinds.index("session.next.text.ended"), kinds


def user_texts(request_body: dict) -> list[str]:
    return [str(m["content"]) for m in request_body["messages"] if m["role"] == "user"]


async def test_run_json_then_continue(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    provider.queue(said("first answer"))
    done = await cli("run", "--model", "local/m1", "--format", "json", "hello there")
    assert done.returncode == 0, done.stderr.decode()
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    kinds = [e["type"] for e in events]
    assert "session.next.step.started" in kinds and "session.next.step.ended" in kinds
    assert_in_order(kinds)
    ended = [e for e in events if e["type"] == "session.next.text.ended"]
    assert [e["data"]["text"] for e in ended] == ["first answer"]
    sid = session_of(done.stderr)
    assert {e["durable"]["aggregateID"] for e in events if "durable" in e} == {sid}
    assert provider.requests[0].json()["model"] == "m1"

    provider.queue(said("second answer"))
    again = await cli("run", "--continue", "and again")
    assert again.returncode == 0, again.stderr.decode()
    assert again.stdout.decode() == "second answer\n"
    assert session_of(again.stderr) == sid
    body = provider.requests[1].json()
    assert any("hello there" in t for t in user_texts(body))
    assert any("and again" in t for t in user_texts(body))
    assistant = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistant and "first answer" in str(assistant[0]["content"])

    provider.queue(said("third"))
    chosen = await cli("run", "--session", sid, "once more")
    assert chosen.returncode == 0 and session_of(chosen.stderr) == sid


async def interrupted(cli: Cli, *args: str) -> tuple[int | None, str]:
    """``kittiwake run *args`` against a provider that sends its first delta ("Streaming")
    and then holds the stream open, sent SIGINT once that delta is printed: its exit status
    and standard error."""
    cli.provider.queue(
        Reply(chunks=[sse(chunk({"role": "assistant", "content": "Streaming"}))], hang=True)
    )
    proc = await trio.lowlevel.open_process(
        cli.argv("run", *args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=cli.project, env=cli.env,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    seen = b""
    with trio.fail_after(30):
        while b"Streaming" not in seen:
            data = await proc.stdout.receive_some(4096)
            assert data, "stdout closed before the first text"
            seen += data
    assert cli.provider.disconnects == 0  # the step is still streaming
    proc.send_signal(signal.SIGINT)
    err = b""
    with trio.fail_after(30):
        while data := await proc.stderr.receive_some(4096):
            err += data
        await proc.wait()
    return proc.returncode, err.decode()


async def test_run_streams_before_the_step_ends_and_ctrl_c_interrupts(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    status, text = await interrupted(cli, "tell", "me")
    assert status == 130, text
    sid = session_of(text.encode())
    assert f"interrupted session {sid}; continue with: kittiwake run --session {sid} PROMPT" in text
    assert "Traceback" not in text


async def test_piped_prompt_and_tool_calls_are_shown(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    (cli.project / "notes.txt").write_text("kittiwake notes\n")
    provider.queue(calls_read("notes.txt"), said("read it"))
    done = await cli("run", stdin=b"summarise notes.txt\n")
    assert done.returncode == 0, done.stderr.decode()
    assert user_texts(provider.requests[0].json()) == ["summarise notes.txt"]
    err = done.stderr.decode()
    assert '→ read {"filePath":"notes.txt"}' in err and "✓ read" in err
    assert done.stdout.decode() == "read it\n"
    tool_result = [m for m in provider.requests[1].json()["messages"] if m["role"] == "tool"]
    assert "kittiwake notes" in str(tool_result)


async def test_an_empty_or_oversized_prompt_is_refused_before_anything_is_created(
    tmp_path, provider
):
    cli = Cli(tmp_path, provider)
    for args, stdin in (((), b""), (("  ",), b"\n \n")):
        done = await cli("run", *args, stdin=stdin)
        assert done.returncode == 2
        assert done.stderr.decode() == (
            "kittiwake: run needs a prompt: as arguments, or piped on standard input\n"
        )
    big = await cli("run", "--command", "init", stdin=b"x" * (1024 * 1024))
    assert big.returncode == 2
    assert big.stderr.decode() == (
        "kittiwake: the prompt is 1048609 bytes as sent, over the server's request limit "
        "of 1048576 bytes (1 MiB)\n"
    )
    assert sorted(p.name for p in cli.data.iterdir()) == ["models-dev.json"]
    assert provider.requests == []


async def test_a_failed_step_exits_1_with_the_reason(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    provider.queue(Reply(status=400, json_body={"error": {"message": "model m1 is gone"}}))
    done = await cli("run", "hello")
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "kittiwake: step failed:" in err and "model m1 is gone" in err
    assert "Traceback" not in err


async def test_commands_beside_a_server_attach_to_it(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    server = await trio.lowlevel.open_process(
        cli.argv("serve", "--port", "0"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd=cli.project, env=cli.env,
    )  # fmt: skip
    try:
        url = await serving_url(server)
        note = f"kittiwake: attaching to the kittiwake serve on {url} that holds {cli.data}"

        provider.queue(said("attached answer"))
        done = await cli("run", "hello")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == "attached answer\n"
        assert done.stderr.decode().splitlines()[0] == note
        sid = session_of(done.stderr)
        listed = await cli("sessions", "list")
        assert listed.returncode == 0, listed.stderr.decode()
        assert listed.stderr.decode().splitlines() == [note]
        assert [line.split()[0] for line in listed.stdout.decode().splitlines()] == [sid]

        # A prompt over the server's body limit: refused before a session is created.
        big = await cli("run", stdin=b"x" * (2 * 1024 * 1024))
        assert big.returncode == 2, big.stderr.decode()
        assert big.stderr.decode().splitlines()[-1] == (
            "kittiwake: the prompt is 2097174 bytes as sent, over the server's request limit "
            "of 1048576 bytes (1 MiB)"
        )
        # A first prompt the server refuses: the session made for it is gone too.
        unknown = await cli("run", "--command", "nope", "hello")
        assert unknown.returncode == 1
        assert "InvalidRequestError: Unknown command 'nope'" in unknown.stderr.decode()
        listed = await cli("sessions", "list")
        assert [line.split()[0] for line in listed.stdout.decode().splitlines()] == [sid]

        # Interrupted with --attach: the command it suggests names the server too, and works.
        status, text = await interrupted(cli, "--attach", url, "tell", "me")
        assert status == 130, text
        hint = text.split("continue with: ")[-1].strip()
        stopped = session_of(text.encode())
        assert hint == f"kittiwake run --attach {url} --session {stopped} PROMPT"
        provider.queue(said("continued"))
        again = await cli(*hint.split()[1:-1], "go", "on")
        assert again.returncode == 0, again.stderr.decode()
        assert again.stdout.decode() == "continued\n"
        assert session_of(again.stderr) == stopped

        started = time.monotonic()
        refused = await cli("serve", "--port", "0")
        took = time.monotonic() - started
        assert refused.returncode == 1
        lines = refused.stderr.decode().splitlines()
        assert lines == [
            f"kittiwake: the data dir {cli.data} is in use by process {server.pid} "
            f"(kittiwake serve on {url}); stop it, or serve another --data-dir"
        ]
        # Refused while the holder still runs, not after waiting for it: the server holds
        # the dir until the end, so a waiting command would run into the 60 s limit.
        # Start-up takes about 0.5 s on a quiet machine, several at a load of 15.
        assert server.returncode is None
        assert took < 10, took
    finally:
        server.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            await server.wait()
    assert server.returncode == 0
    assert not (cli.data / "serving.json").exists()


async def test_port_in_use_and_bad_port_are_one_line(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await cli("serve", "--port", str(port))
    assert done.returncode == 1
    err = done.stderr.decode()
    assert (
        err.splitlines()[-1]
        == f"kittiwake: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert "Traceback" not in err
    bad = await cli("serve", "--port", "99999")
    assert bad.returncode == 2
    assert bad.stderr.decode().splitlines() == [
        "kittiwake serve: argument --port: 99999 is not a port number (0-65535)"
        " (see kittiwake serve --help)"
    ]
    missing = await cli("serve", "--directory", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert missing.stderr.decode().splitlines() == [
        f"kittiwake: --directory {tmp_path / 'nowhere'}: not a directory"
    ]


async def test_malformed_credentials_file_is_one_line(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    (cli.data / "auth.json").write_text("{not json")
    for args in (("serve", "--port", "0"), ("run", "hello")):
        done = await cli(*args)
        assert done.returncode == 1, args
        lines = done.stderr.decode().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"kittiwake: corrupt credential store {cli.data / 'auth.json'}")
        assert lines[0].endswith("; fix or remove it")
    assert provider.requests == []


async def test_help_documents_options_and_environment(tmp_path):
    cli = Cli(tmp_path, None)
    top = await cli("--help")
    text = top.stdout.decode()
    for word in ("KITTIWAKE_DATA_DIR", "KITTIWAKE_MODEL", "KITTIWAKE_SERVER_PASSWORD",
                 "KITTIWAKE_CORS_ORIGINS", "KITTIWAKE_LOG", "exit status"):  # fmt: skip
        assert word in text
    run = (await cli("run", "--help")).stdout.decode()
    for option in ("--model", "--agent", "--session", "--continue", "--format", "--attach",
                   "--data-dir", "standard input", "KITTIWAKE_DATA_DIR"):  # fmt: skip
        assert option in run
    serve = (await cli("serve", "--help")).stdout.decode()
    for option in ("--port", "--hostname", "--data-dir", "--directory"):
        assert option in serve
    shown = await cli("--version")
    assert re.fullmatch(r"kittiwake \S+\n", shown.stdout.decode())


CAREFUL = "---\ndescription: asks before reading\npermission:\n  read: ask\n---\nBe careful.\n"


def careful_project(cli: Cli) -> None:
    (cli.project / ".kittiwake" / "agent").mkdir(parents=True)
    (cli.project / ".kittiwake" / "agent" / "careful.md").write_text(CAREFUL)
    (cli.project / "notes.txt").write_text("kittiwake notes\n")


async def test_permission_is_asked_on_the_terminal(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    careful_project(cli)
    provider.queue(calls_read("notes.txt"), said("read it"))
    master, slave = os.openpty()  # standard input is a terminal: the question is asked there
    try:
        proc = await trio.lowlevel.open_process(
            cli.argv("run", "--agent", "careful", "read", "the", "notes"), stdin=slave,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cli.project, env=cli.env,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        assert proc.stderr is not None and proc.stdout is not None
        err = b""
        with trio.fail_after(30):
            while b"[o]nce, [a]lways, [r]eject" not in err:
                data = await proc.stderr.receive_some(4096)
                assert data, err.decode()
                err += data
        assert "kittiwake: allow read " in err.decode()
        assert len(provider.requests) == 1  # the tool waits for the answer
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
    assert out.decode() == "read it\n"
    assert "✓ read" in err.decode()
    tool_result = [m for m in provider.requests[1].json()["messages"] if m["role"] == "tool"]
    assert "kittiwake notes" in str(tool_result)


async def test_permission_without_a_terminal_is_rejected(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    careful_project(cli)
    provider.queue(calls_read("notes.txt"), said("could not read it"))
    with trio.fail_after(60):
        done = await trio.run_process(
            cli.argv("run", "--agent", "careful", "read", "the", "notes"), stdin=b"",
            capture_stdout=True, capture_stderr=True, check=False, cwd=cli.project,
            env=cli.env, start_new_session=True,  # no controlling terminal: no /dev/tty
        )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "needs permission; no terminal, rejected" in err and "✗ read" in err
    tool_result = [m for m in provider.requests[1].json()["messages"] if m["role"] == "tool"]
    assert "kittiwake notes" not in str(tool_result)


async def test_a_drain_that_hits_the_turn_cap_exits_1_with_the_reason(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    (cli.project / ".kittiwake" / "agent").mkdir(parents=True)
    (cli.project / ".kittiwake" / "agent" / "brief.md").write_text(
        "---\ndescription: two turns at most\nsteps: 2\n---\nBe brief.\n"
    )
    (cli.project / "notes.txt").write_text("kittiwake notes\n")
    provider.queue(*(calls_read("notes.txt") for _ in range(4)))
    done = await cli("run", "--agent", "brief", "read", "forever")
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "Traceback" not in err
    # Work remained after the agent's two turns: the durable failure says so.
    assert "kittiwake: step failed: Work remained after 2 provider turns" in err
    assert len(provider.requests) == 2


def test_a_data_dir_taken_after_the_check_is_the_same_one_line(tmp_path, monkeypatch, capsys):
    from gateway import cli as cli_module
    from storage import EventStore, Journal

    data = tmp_path / "data"
    held = Journal.open(data / "journal")  # taken by this process, after the check passed
    monkeypatch.setattr(EventStore, "check_free", staticmethod(lambda directory: None))
    monkeypatch.chdir(tmp_path)
    try:
        started = time.monotonic()
        status = cli_module.main(["sessions", "list", "--data-dir", str(data)])
        took = time.monotonic() - started
    finally:
        held.close()
    assert status == 1
    assert capsys.readouterr().err == (
        f"kittiwake: the data dir {data} is in use by process {os.getpid()}; "
        "wait for it to end, or pass another --data-dir\n"
    )
    assert took < 10


async def test_run_uses_a_provider_that_exists_only_in_configuration(tmp_path, provider):
    cli = Cli(tmp_path, None)  # no catalog planted, no API-key variable
    cli.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    (cli.project / "kittiwake.json").write_text(
        json.dumps(
            {
                "model": "box/small",
                "provider": {
                    "box": {
                        "npm": "@ai-sdk/openai-compatible",
                        "options": {"baseURL": provider.base_url},
                        "models": {"small": {"name": "Small", "tool_call": True}},
                    }
                },
            }
        )
    )
    provider.queue(said("configured answer"))
    done = await cli("run", "hello")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "configured answer\n"
    assert provider.requests[0].json()["model"] == "small"
    (cli.project / "kittiwake.json").write_text('{"model": ')
    broken = await cli("run", "hello")
    assert broken.returncode == 2
    lines = broken.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"kittiwake: {cli.project / 'kittiwake.json'}:1:"
    )


async def test_an_unknown_session_or_nothing_to_continue_is_one_line(tmp_path, provider):
    cli = Cli(tmp_path, provider)
    nothing = await cli("run", "--continue", "hello")
    assert nothing.returncode == 1
    assert nothing.stderr.decode().splitlines()[-1] == (
        f"kittiwake: no session in {cli.project} to continue"
    )
    unknown = await cli("run", "--session", "ses_nope", "hello")
    assert unknown.returncode == 1
    last = unknown.stderr.decode().splitlines()[-1]
    assert last.startswith("kittiwake: GET /api/session/ses_nope: SessionNotFoundError")
    both = await cli("run", "--session", "ses_nope", "--continue", "hello")
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr.decode()
    assert provider.requests == []
    assert "Traceback" not in nothing.stderr.decode() + unknown.stderr.decode()


async def test_serve_directory_is_where_sessions_without_one_work(tmp_path, provider):
    import httpx

    cli = Cli(tmp_path, provider)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server = await trio.lowlevel.open_process(
        cli.argv("serve", "--port", "0", "--directory", str(elsewhere)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        cwd=cli.project, env=cli.env,
    )  # fmt: skip
    try:
        url = await serving_url(server)
        async with httpx.AsyncClient(base_url=url) as client:
            created = (await client.post("/api/session", json={})).json()["data"]
            project = (await client.get("/project/current")).json()
        assert created["location"]["directory"] == str(elsewhere)
        assert project["worktree"] == str(elsewhere)
    finally:
        server.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            await server.wait()
