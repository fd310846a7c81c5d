"""The ACP room's sans-IO parts and its JSON-RPC connection, in process: the updates a
stream makes (chunks never sent twice, parts numbered per step, tool views), the content
a prompt's blocks make, and the connection's limits and cancellation."""

from __future__ import annotations

import json

import msgspec
import pytest
import trio
import trio.testing

from actors import SessionEvent
from gateway.acp import Connection, RpcError
from gateway.acp._content import leading_command, to_prompt
from gateway.acp._rpc import Method
from gateway.acp._updates import Ask, Updates
from gateway.acp._wire import (
    AgentMessageChunk,
    ImageBlock,
    ResourceBlock,
    ResourceContents,
    ResourceLinkBlock,
    TextBlock,
    ToolCallStart,
    ToolCallUpdate,
)
from runtime import events as ev

SID = "ses_1"


def event(seq: int, item: ev.DurableEvent) -> SessionEvent:
    return SessionEvent(seq=seq, id=f"evt_{seq}", event=item)


def texts(actions: list) -> list[str]:
    return [a.content.text for a in actions if isinstance(a, AgentMessageChunk)]


def test_a_part_is_sent_once_whatever_order_deltas_and_its_end_arrive_in() -> None:
    updates = Updates("/p")
    base = {"session_id": SID, "timestamp": 1}
    live = {"session_id": SID, "timestamp": 1}
    sent = updates.feed(
        ev.TextDelta(**live, assistant_message_id="msg_a", text_id="0", delta="Hel")
    )
    sent += updates.feed(event(3, ev.TextEnded(**base, assistant_message_id="msg_a", text_id="0",
                                               text="Hello")))  # fmt: skip
    sent += updates.feed(
        ev.TextDelta(**live, assistant_message_id="msg_a", text_id="0", delta="lo")
    )
    # The next step's part has the same provider id: it is a part of its own.
    sent += updates.feed(
        ev.TextDelta(**live, assistant_message_id="msg_b", text_id="0", delta="Bye")
    )
    sent += updates.feed(event(9, ev.TextEnded(**base, assistant_message_id="msg_b", text_id="0",
                                               text="Bye")))  # fmt: skip
    assert texts(sent) == ["Hel", "lo", "Bye"]
    assert [a.message_id for a in sent] == ["msg_a", "msg_a", "msg_b"]


def test_tool_calls_show_kind_title_locations_diffs_and_their_end() -> None:
    updates = Updates("/p")
    base = {"session_id": SID, "timestamp": 1, "assistant_message_id": "msg_a"}
    edit = {"filePath": "src/a.py", "oldString": "x = 1", "newString": "x = 2"}
    started = updates.feed(event(1, ev.ToolInputStarted(**base, call_id="c1", name="edit")))
    called = updates.feed(event(2, ev.ToolCalled(**base, call_id="c1", tool="edit", input=edit)))
    asked = updates.feed(
        event(3, ev.PermissionAsked(**{k: v for k, v in base.items() if k != "assistant_message_id"},
                                    request_id="per_1", agent="build", tool="edit", call_id="c1",
                                    permission="edit", resources=["src/a.py"]))
    )  # fmt: skip
    ended = updates.feed(event(4, ev.ToolSuccess(**base, call_id="c1", structured={"n": 1})))
    [start] = started
    assert isinstance(start, ToolCallStart) and start.status == "pending" and start.title == "edit"
    [update] = called
    assert isinstance(update, ToolCallUpdate) and update.title == "Edit src/a.py"
    assert update.kind == "edit" and update.status == "in_progress"
    assert [(d.path, d.old_text, d.new_text) for d in update.content] == [
        ("/p/src/a.py", "x = 1", "x = 2")
    ]
    [ask] = asked
    assert isinstance(ask, Ask) and ask.request_id == "per_1"
    assert ask.tool_call.title == "Edit src/a.py" and ask.tool_call.content == update.content
    [done] = ended
    assert done.status == "completed" and done.raw_output == {"n": 1}
    assert done.content == update.content  # an edit keeps showing its diff
    # Replayed, the same events ask nothing.
    replay = Updates("/p", replay=True)
    assert not [
        a for a in replay.feed(event(3, ev.PermissionAsked(
            session_id=SID, timestamp=1, request_id="per_1", agent="build", tool="edit",
            call_id="c1", permission="edit", resources=["src/a.py"]))) if isinstance(a, Ask)
    ]  # fmt: skip


def test_stop_reasons() -> None:
    base = {"session_id": SID, "timestamp": 1, "assistant_message_id": "msg_a"}
    for finish, reason in (("stop", "end_turn"), ("length", "max_tokens"),
                           ("content-filter", "refusal"), ("interrupted", "cancelled")):  # fmt: skip
        updates = Updates("/p")
        updates.feed(event(1, ev.StepEnded(**base, finish=finish)))
        assert updates.stop_reason(cancelled=False) == reason
    limited = Updates("/p")
    limited.feed(event(1, ev.RunFailed(session_id=SID, timestamp=1,
                                       error=ev.RunError(tag="StepLimitExceededError",
                                                         message="too many"))))  # fmt: skip
    assert limited.stop_reason(cancelled=False) == "max_turn_requests"
    assert Updates("/p").stop_reason(cancelled=True) == "cancelled"


def test_blocks_make_a_prompt_and_a_leading_slash_a_command() -> None:
    prompt = to_prompt([
        TextBlock(text="see "), ResourceLinkBlock(uri="file:///w/a%20b.py", name="a b.py"),
        ResourceBlock(resource=ResourceContents(uri="file:///w/c.txt", text="hi")),
        ResourceBlock(resource=ResourceContents(uri="file:///w/d.bin", blob="AAE=")),
        ImageBlock(data="iVBO", mime_type="image/png"),
    ])  # fmt: skip
    assert prompt.text == 'see /w/a b.py/w/c.txt\n\n<file path="/w/c.txt">\nhi\n</file>'
    assert [(f.uri, f.mime, f.name) for f in prompt.files] == [
        ("data:application/octet-stream;base64,AAE=", "application/octet-stream", "d.bin"),
        ("data:image/png;base64,iVBO", "image/png", "image"),
    ]
    with pytest.raises(RpcError):
        to_prompt([TextBlock(text=" ")])
    assert leading_command([TextBlock(text="/sum  a b")], {"sum"}) == ("sum", "a b")
    assert leading_command([TextBlock(text="/sum"), TextBlock(text=" x")], {"sum"}) == ("sum", "x")
    assert leading_command([TextBlock(text="/other a")], {"sum"}) is None
    assert leading_command([TextBlock(text="sum a")], {"sum"}) is None


class _Echo(msgspec.Struct):
    text: str


async def _serve(lines: list[bytes], **limits) -> list[dict]:
    """Serve *lines* on an in-memory pipe pair; every answer written, in order."""
    client, agent_end = trio.testing.memory_stream_pair()
    gate = trio.Event()

    async def echo(params: _Echo) -> dict:
        return {"text": params.text}

    async def slow(params: _Echo) -> dict:
        await gate.wait()
        return {"text": params.text}

    methods = {"echo": Method(_Echo, echo), "slow": Method(_Echo, slow)}
    conn = Connection(agent_end, agent_end, **limits)
    out = b""

    async def serve() -> None:
        async with agent_end:
            await conn.serve(methods, {})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        for line in lines:
            await client.send_all(line)
        await client.send_eof()
        while chunk := await client.receive_some(65536):
            out += chunk
    return [json.loads(line) for line in out.decode().splitlines()]


async def test_an_over_long_line_is_answered_and_skipped() -> None:
    long = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"' + b"x" * 300 + b'"}}\n'
    ok = b'{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"short"}}\n'
    # in one piece, and split across reads
    answers = await _serve([long, long[:100], long[100:], ok], max_line=200)
    assert [a.get("id") for a in answers] == [None, None, 2]
    assert {a["error"]["code"] for a in answers[:2]} == {-32700}
    assert answers[2]["result"] == {"text": "short"}


async def test_cancel_request_and_the_requests_limit(autojump_clock) -> None:
    lines = [
        b'{"jsonrpc":"2.0","id":"a","method":"slow","params":{"text":"1"}}\n',
        b'{"jsonrpc":"2.0","id":"b","method":"slow","params":{"text":"2"}}\n',
        b'{"jsonrpc":"2.0","id":"c","method":"slow","params":{"text":"3"}}\n',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a"}}\n',
    ]
    answers = await _serve(lines, max_requests=2, close_grace=5.0)
    by_id = {a["id"]: a for a in answers}
    assert by_id["c"]["error"]["code"] == -32600  # over the limit
    assert by_id["a"]["error"]["code"] == -32800  # cancelled by the client
    assert "b" not in by_id  # still running after the grace: cancelled unanswered


def test_the_rooms_names_are_pinned_and_sorted() -> None:
    import importlib
    import pkgutil

    import gateway.acp

    assert gateway.acp.__all__ == sorted(gateway.acp.__all__)
    public = sorted(n for n in vars(gateway.acp) if not n.startswith("_") and n != "annotations")
    assert gateway.acp.__all__ == public
    for found in pkgutil.iter_modules(gateway.acp.__path__):
        module = importlib.import_module(f"gateway.acp.{found.name}")
        assert module.__all__ == sorted(module.__all__), found.name
        assert all(hasattr(module, name) for name in module.__all__), found.name


async def test_an_overflowed_follow_is_filled_from_the_store(tmp_path) -> None:
    """Nothing read while a run streams 60 deltas into a subscription holding 4: the run's
    durable events come from the store, and its text whole at the part's end."""
    from gateway.acp import EmbeddedBackend
    from runtime import Location, Prompt, open_runtime
    from runtime.llm import ScriptedLLM, StepFinish, StepStart, TextDelta, TextEnd, TextStart

    words = [f"w{n} " for n in range(60)]
    script = [StepStart(), TextStart(id="t"), *[TextDelta(id="t", delta=w) for w in words],
              TextEnd(id="t"), StepFinish(finish_reason="stop", usage=None)]  # fmt: skip
    async with open_runtime(data_dir=tmp_path, llm=ScriptedLLM(lambda request: script)) as rt:
        backend = EmbeddedBackend(rt, max_buffer=4)
        info = await rt.sessions.create(location=Location(directory=str(tmp_path)))
        updates = Updates(str(tmp_path))
        async with backend.follow(info.id, None) as follow:
            receipt = await backend.prompt(info.id, Prompt(text="talk"))
            await backend.wait_idle(info.id)  # nothing read meanwhile: the buffer overflows
            idle = trio.Event()
            idle.set()
            sent = [a for item in [i async for i in follow.items(receipt.admitted_seq - 1, idle)]
                    for a in updates.feed(item)]  # fmt: skip
    assert "".join(texts(sent)) == "".join(words)
    assert updates.stop_reason(cancelled=False) == "end_turn"


async def test_initialize_is_answered_before_the_backend_and_the_rest_waits_for_it(
    tmp_path,
) -> None:
    from gateway.acp import AcpAgent, AgentOptions, EmbeddedBackend
    from runtime import open_runtime

    client, agent_end = trio.testing.memory_stream_pair()
    agent = AcpAgent(Connection(agent_end, agent_end), None, AgentOptions(version="test"))
    received = b""

    async def answer() -> dict:
        nonlocal received
        while b"\n" not in received:
            received += await client.receive_some(65536)
        line, _, received = received.partition(b"\n")
        return json.loads(line)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.serve)
        await client.send_all(
            b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}\n'
        )
        first = await answer()
        assert first["id"] == 2 and first["result"]["agentInfo"]["version"] == "test"
        async with open_runtime(data_dir=tmp_path) as rt:
            agent.attach(EmbeddedBackend(rt), provider_ready=True)
            listed = await answer()  # the list waited for the backend
            assert listed == {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}
        nursery.cancel_scope.cancel()
