"""Settling is total: a tool call or an answer cut short ends durably, and every later
request is one a provider accepts (each tool call answered, no empty assistant message)."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import httpx
import msgspec
import trio
from msgspec import UNSET

from actors.session._turn import INTERRUPTED_TOOL, NO_TOOLS, Turn, run_turn
from runtime import AssistantMessage, Location, ModelRef, Prompt, llm, open_runtime
from runtime import events as ev
from runtime import messages as m
from runtime.agents import BUILD, PermissionRequest, PermissionRule
from runtime.llm import Auth, Catalog, ProviderClient, RetryPolicy
from runtime.tools import (
    Tool,
    ToolContext,
    ToolEnvironment,
    ToolOutput,
    ToolRegistry,
    shell_tool,
)
from runtime.tools.testing import testing_registry
from storage import Append
from tests.execution.conftest import (
    answer,
    eventually,
    prompt,
    published,
    request_problems,
    roles,
    running,
    tool_calls,
)
from tests.llm.conftest import SAMPLE, LocalServer, Reply
from tests.llm.streams import sse


async def _assistants(rt: object, sid: str) -> list[AssistantMessage]:
    context = await rt.sessions.context(sid)  # type: ignore[attr-defined]
    return [x for x in context if isinstance(x, AssistantMessage)]


async def _tool(rt: object, sid: str, call_id: str) -> m.AssistantTool:
    for message in await _assistants(rt, sid):
        for part in message.content:
            if isinstance(part, m.AssistantTool) and part.id == call_id:
                return part
    raise AssertionError(f"no tool part {call_id}")


def _result_text(request: llm.LLMRequest, call_id: str) -> tuple[str, bool]:
    for message in request.messages:
        if isinstance(message, llm.ToolMessage):
            for part in message.content:
                if part.call_id == call_id:
                    text = "".join(p.text for p in part.content if isinstance(p, llm.TextPart))
                    return text, part.is_error
    raise AssertionError(f"no result for {call_id}")


def _closed_interrupted(message: AssistantMessage) -> bool:
    return message.finish == "interrupted" and message.time.completed is not UNSET


# -- an interrupt while a tool runs ----------------------------------------------------------


async def test_interrupt_during_a_running_shell_command_answers_the_call(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = "echo $$ > shell.pid; sleep 30"
    client = llm.ScriptedLLM(
        [tool_calls(("c1", "shell", {"command": command})), answer("after the interrupt")]
    )
    async with open_runtime(data_dir=tmp_path / "data", llm=client) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        await rt.sessions.prompt(sid, prompt=Prompt(text="run it"))
        pid_file = work / "shell.pid"
        with trio.fail_after(10):  # the shell child writes it; nothing in this process is told
            while not (pid_file.exists() and pid_file.read_text().strip()):  # noqa: ASYNC110
                await trio.sleep(0.01)
        pid = int(pid_file.read_text())
        assert isinstance((await _tool(rt, sid, "c1")).state, m.ToolRunning)
        with trio.fail_after(10):
            await rt.sessions.interrupt(sid)
        # the command's process group was killed
        assert not await trio.Path(f"/proc/{pid}").exists()

        tool = await _tool(rt, sid, "c1")
        assert isinstance(tool.state, m.ToolError)
        assert tool.state.error.message == INTERRUPTED_TOOL
        assert _closed_interrupted((await _assistants(rt, sid))[0])

        await rt.sessions.prompt(sid, prompt=Prompt(text="again"))
        await rt.sessions.wait_idle(sid)
    request = client.requests[-1]
    assert roles(request) == ["UserMessage", "AssistantMessage", "ToolMessage", "UserMessage"]
    assert request_problems(request) == []
    assert _result_text(request, "c1") == (INTERRUPTED_TOOL, True)


class NestedInput(msgspec.Struct, frozen=True, kw_only=True):
    pass


def _nested_registry(started: trio.Event) -> tuple[list[str], object]:
    """Testing tools plus ``nested``, which waits inside a nursery of its own: its
    cancellation leaves it as a ``BaseExceptionGroup``."""
    ran: list[str] = []

    async def nested(data: NestedInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            ran.append(ctx.tool_call_id)
            started.set()
        return ToolOutput(content=[])

    def tools(env: ToolEnvironment) -> ToolRegistry:
        registry, _ = testing_registry(env)
        registry.contribute(
            Tool(name="nested", description="Wait.", input_type=NestedInput, handler=nested)
        )
        return registry

    return ran, tools


async def test_interrupt_arriving_as_an_exception_group_answers_every_call(
    tmp_path: Path,
) -> None:
    started = trio.Event()
    ran, tools = _nested_registry(started)
    calls = tool_calls(("n1", "nested", {}), ("n2", "nested", {}), ("e1", "echo", {"text": "hi"}))
    client = llm.ScriptedLLM([calls, answer("resumed")])
    work = tmp_path / "work"
    work.mkdir()
    async with open_runtime(data_dir=tmp_path / "data", llm=client, tools=tools) as rt:  # type: ignore[arg-type]
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await started.wait()
        await eventually(lambda: len(ran) == 2)
        with trio.fail_after(10):
            await rt.sessions.interrupt(sid)
        states = {c: (await _tool(rt, sid, c)).state for c in ("n1", "n2", "e1")}
        assert isinstance(states["e1"], m.ToolCompleted)
        for call in ("n1", "n2"):
            state = states[call]
            assert isinstance(state, m.ToolError) and state.error.message == INTERRUPTED_TOOL
        assert _closed_interrupted((await _assistants(rt, sid))[0])

        await rt.sessions.resume(sid)
    request = client.requests[-1]
    assert request_problems(request) == []
    assert _result_text(request, "n1") == (INTERRUPTED_TOOL, True)
    assert _result_text(request, "e1") == ("hi", False)


# -- an answer cut short -----------------------------------------------------------------------


class CutStream:
    """The first stream yields reasoning and 30 text deltas, then hangs until cancelled;
    later streams answer."""

    def __init__(self) -> None:
        self.requests: list[llm.LLMRequest] = []
        self.streamed = trio.Event()

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        self.requests.append(request)
        if len(self.requests) > 1:
            for event in answer("again"):
                yield event
            return
        yield llm.StepStart()
        yield llm.ReasoningStart(id="r1")
        yield llm.ReasoningDelta(id="r1", delta="thinking it over")
        yield llm.ReasoningEnd(id="r1")
        yield llm.ReasoningStart(id="r2")
        yield llm.ReasoningDelta(id="r2", delta="and more")
        yield llm.TextStart(id="t1")
        for i in range(30):
            await trio.lowlevel.checkpoint()
            yield llm.TextDelta(id="t1", delta=f"w{i} ")
        self.streamed.set()
        await trio.sleep_forever()


STREAMED = "".join(f"w{i} " for i in range(30))


async def test_an_interrupt_mid_stream_keeps_the_streamed_text(tmp_path: Path) -> None:
    client = CutStream()
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("talk"))
        await client.streamed.wait()
        with trio.fail_after(10):
            await rt.sessions.interrupt(sid)
        [message] = await _assistants(rt, sid)
        assert _closed_interrupted(message)
        texts = [
            (type(p).__name__, p.text)
            for p in message.content
            if not isinstance(p, m.AssistantTool)
        ]
        assert texts == [
            ("AssistantReasoning", "thinking it over"),
            ("AssistantReasoning", "and more"),
            ("AssistantText", STREAMED),
        ]
        await rt.sessions.prompt(sid, prompt=prompt("go on"))
        await rt.sessions.wait_idle(sid)
    request = client.requests[-1]
    assert roles(request) == ["UserMessage", "AssistantMessage", "UserMessage"]
    assert request_problems(request) == []
    sent = request.messages[1]
    assert isinstance(sent, llm.AssistantMessage)
    assert [getattr(p, "text", None) for p in sent.content] == [
        "thinking it over",
        "and more",
        STREAMED,
    ]


# A local HTTP server speaking OpenAI Chat Completions SSE, which can cut its socket.


class CutReply(Reply):
    """A reply whose connection is closed after its chunks, before the body ends."""


class ChatServer(LocalServer):
    async def _respond(self, conn: h11.Connection, stream: trio.SocketStream, reply: Reply) -> None:
        if not isinstance(reply, CutReply):
            await super()._respond(conn, stream, reply)
            return
        head = h11.Response(
            status_code=200,
            headers=[("content-type", "text/event-stream"), ("transfer-encoding", "chunked")],
        )
        await stream.send_all(conn.send(head))
        for chunk in reply.chunks:
            await stream.send_all(conn.send(h11.Data(data=chunk)))
        await stream.aclose()
        raise trio.ClosedResourceError("cut")


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


PARTIAL = [
    sse(_chunk({"role": "assistant", "content": piece})) for piece in ("par", "tial ", "answer")
]
ANSWER = sse(
    _chunk({"role": "assistant", "content": "fine"}),
    _chunk({}, "stop"),
    {"id": "c", "choices": None, "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
    done=True,
)
LAB = {
    "provider": {
        "lab": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Lab",
            "options": {"apiKey": "{env:LAB_KEY}"},
            "models": {"chat": {"name": "Chat", "limit": {"context": 32768, "output": 4096}}},
        }
    }
}


@asynccontextmanager
async def _lab_runtime(tmp_path: Path, server: LocalServer) -> AsyncIterator[Any]:
    config = {
        "provider": {
            "lab": {
                **LAB["provider"]["lab"],
                "options": {"apiKey": "{env:LAB_KEY}", "baseURL": server.base_url + "/v1"},
            }
        }
    }
    catalog = Catalog.from_models_dev(json.loads(SAMPLE.read_text())).with_config(config)
    async with httpx.AsyncClient() as http:
        client = ProviderClient(
            catalog, Auth(env={"LAB_KEY": "k"}), http_client=http, retry=RetryPolicy(max_attempts=1)
        )
        model = ModelRef(provider_id="lab", id="chat")
        async with running(tmp_path, client, default_model=model) as rt:
            yield rt


async def _serve(nursery: trio.Nursery) -> ChatServer:
    server = ChatServer()
    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
    )
    server.port = listeners[0].socket.getsockname()[1]
    return server


def _wire_history(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in body["messages"] if message["role"] != "system"]


async def _cut_then_answer(tmp_path: Path, first: Reply) -> tuple[AssistantMessage, dict[str, Any]]:
    async with trio.open_nursery() as nursery:
        server = await _serve(nursery)
        server.queue(first, Reply(chunks=[ANSWER]))
        async with _lab_runtime(tmp_path, server) as rt:
            sid = rt.test_session
            await rt.sessions.prompt(sid, prompt=prompt("talk"))
            await rt.sessions.wait_idle(sid)
            [message] = await _assistants(rt, sid)
            await rt.sessions.prompt(sid, prompt=prompt("go on"))
            await rt.sessions.wait_idle(sid)
        nursery.cancel_scope.cancel()
    assert len(server.requests) == 2
    return message, server.requests[1].json()


async def test_a_dropped_connection_keeps_the_streamed_text(tmp_path: Path) -> None:
    message, body = await _cut_then_answer(tmp_path, CutReply(chunks=PARTIAL))
    assert [(p.id, p.text) for p in message.content if isinstance(p, m.AssistantText)] == [
        ("text-0", "partial answer")
    ]
    assert message.error is not UNSET and message.time.completed is not UNSET
    assert _wire_history(body) == [
        {"role": "user", "content": "talk"},
        {"role": "assistant", "content": "partial answer"},
        {"role": "user", "content": "go on"},
    ]


async def test_an_error_event_in_the_stream_keeps_the_streamed_text(tmp_path: Path) -> None:
    error = sse({"error": {"message": "The server had an error", "type": "server_error"}})
    message, body = await _cut_then_answer(tmp_path, Reply(chunks=[*PARTIAL, error]))
    assert [p.text for p in message.content if isinstance(p, m.AssistantText)] == ["partial answer"]
    assert message.error is not UNSET and "server had an error" in message.error.message
    assert message.time.completed is not UNSET
    assert _wire_history(body) == [
        {"role": "user", "content": "talk"},
        {"role": "assistant", "content": "partial answer"},
        {"role": "user", "content": "go on"},
    ]


# -- only the tools a request offered can run from its answer -------------------------------


async def test_a_tool_call_on_the_final_step_fails_without_running(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = {"command": "echo ran >> side.txt"}
    client = llm.ScriptedLLM(
        [tool_calls(("c1", "shell", command)), tool_calls(("c2", "shell", command)), answer("ok")]
    )
    agents = {"build": msgspec.structs.replace(BUILD, steps=2)}
    async with open_runtime(data_dir=tmp_path / "data", llm=client, agents=agents) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        await rt.sessions.prompt(sid, prompt=Prompt(text="run it twice"))
        await rt.sessions.wait_idle(sid)
        assert (work / "side.txt").read_text() == "ran\n"  # the first call ran, the second not
        final = client.requests[1]
        assert final.tools == [] and final.tool_choice == "none"
        refused = await _tool(rt, sid, "c2")
        assert isinstance(refused.state, m.ToolError)
        assert refused.state.error.message == NO_TOOLS

        await rt.sessions.prompt(sid, prompt=Prompt(text="and now?"))
        await rt.sessions.wait_idle(sid)
    assert (work / "side.txt").read_text() == "ran\n"
    assert request_problems(client.requests[-1]) == []
    assert _result_text(client.requests[-1], "c2") == (NO_TOOLS, True)


async def test_a_call_to_a_tool_the_request_did_not_offer_fails_without_running(
    tmp_path: Path,
) -> None:
    client = llm.ScriptedLLM(
        [tool_calls(("g1", "gated", {"key": "k"}), ("e1", "echo", {"text": "hi"})), answer()]
    )
    agents = {"build": msgspec.structs.replace(BUILD, tools={"gated": False})}
    async with running(tmp_path, client, agents=agents) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        assert "gated" not in [t.name for t in client.requests[0].tools]
        assert rt.test_gates.started == []
        refused = await _tool(rt, sid, "g1")
        assert isinstance(refused.state, m.ToolError)
        assert refused.state.error.message == "Tool gated is not available for this request"
        assert isinstance((await _tool(rt, sid, "e1")).state, m.ToolCompleted)
    assert request_problems(client.requests[1]) == []


# -- a permission wait cut by a cancellation ------------------------------------------------


async def test_a_reply_racing_the_cancellation_of_its_wait_lets_the_cancellation_through(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, llm.ScriptedLLM([])) as rt:
        sid, permissions = rt.test_session, rt.execution.permissions
        request = PermissionRequest(
            id="per_race", session_id=sid, agent="build", tool="shell", call_id="c1",
            permission="bash", resources=["ls"],
        )  # fmt: skip
        outcome: list[object] = []

        async def ask(scope: trio.CancelScope) -> None:
            try:
                with scope:
                    outcome.append(await permissions.ask(request))
            except Exception as exc:  # noqa: BLE001 - what escaped instead of the cancellation
                outcome.append(exc)
            else:
                outcome.append("cancelled" if scope.cancelled_caught else "returned")

        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            with rt.hub.subscribe(sid) as sub:
                nursery.start_soon(ask, scope)
                await published(sub, "permission.v2.asked")  # stored: the ask now waits
            scope.cancel()  # the waiting task is woken with Cancelled, not yet run
            await permissions.reply(sid, request.id, "once")
        assert outcome == ["cancelled"]
        [recorded] = await rt.sessions.permissions(sid)
        assert recorded.status == "once"  # the reply stands


# -- the invariant, and errors other than cancellation ----------------------------------------


async def test_a_drain_refuses_to_send_a_tool_call_without_its_result(tmp_path: Path) -> None:
    client = llm.ScriptedLLM([answer("first"), answer("never sent")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("one"))
        await rt.sessions.wait_idle(sid)  # the actor has recovered: nothing repairs history now
        ids = {"timestamp": 1, "session_id": sid, "assistant_message_id": "msg_cut"}
        model = ev.ModelRef(id="m", provider_id="p")
        unanswered = [
            ev.StepStarted(**ids, agent="build", model=model),
            ev.ToolCalled(**ids, call_id="c9", tool="echo", input={"text": "x"}),
        ]
        await rt.storage.write(Append(session_id=sid, events=unanswered))
        await rt.sessions.prompt(sid, prompt=prompt("two"))
        await rt.sessions.wait_idle(sid)
        assert len(client.requests) == 1  # nothing was sent
        [actor] = rt.execution.active_sessions()
        assert actor.last_error is not None
        assert "UnansweredToolCallError" in actor.last_error and "c9" in actor.last_error


class ExplodingApprovals:
    """Saved approvals whose store fails: an error escaping a tool call's settlement."""

    async def is_approved(self, project: str, permission: str, resource: str) -> bool:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("approvals unavailable")

    async def save(self, project: str, permission: str, resource: str) -> None:
        raise AssertionError("not saved")


async def test_an_error_escaping_settlement_answers_the_call_and_fails_the_step(
    tmp_path: Path,
) -> None:
    def tools(env: ToolEnvironment) -> ToolRegistry:
        registry, _ = testing_registry(env)
        registry.contribute(shell_tool())
        registry.saved_approvals = ExplodingApprovals()
        return registry

    asking = msgspec.structs.replace(
        BUILD, permission=[*BUILD.permission, PermissionRule(permission="bash", action="ask")]
    )
    calls = tool_calls(("s1", "shell", {"command": "echo hi"}), ("g1", "gated", {"key": "k"}))
    client = llm.ScriptedLLM([calls, answer("after")])
    work = tmp_path / "work"
    work.mkdir()
    options: dict[str, Any] = {"tools": tools, "agents": {"build": asking}}
    async with open_runtime(data_dir=tmp_path / "data", llm=client, **options) as rt:
        sid = (await rt.sessions.create(location=Location(directory=str(work)))).id
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        failed = (await _tool(rt, sid, "s1")).state
        assert isinstance(failed, m.ToolError)
        assert failed.error.message == "Tool execution failed: RuntimeError: approvals unavailable"
        cut = (await _tool(rt, sid, "g1")).state  # cancelled when its sibling failed
        assert isinstance(cut, m.ToolError) and cut.error.message == INTERRUPTED_TOOL
        [message] = await _assistants(rt, sid)
        assert message.error is not UNSET and "approvals unavailable" in message.error.message
        assert message.time.completed is not UNSET

        await rt.sessions.prompt(sid, prompt=prompt("again"))
        await rt.sessions.wait_idle(sid)
    assert request_problems(client.requests[-1]) == []


async def test_a_stream_failing_mid_call_leaves_no_call_unanswered(tmp_path: Path) -> None:
    cut = [
        llm.StepStart(),
        llm.ToolCall(call_id="h1", name="web_search", input={"q": "x"}, provider_executed=True),
        llm.ToolInputStart(call_id="c1", name="echo"),
        llm.ToolInputDelta(call_id="c1", delta='{"te'),
        llm.ProviderError(kind="retryable", message="connection reset"),
    ]
    client = llm.ScriptedLLM([cut, answer("again")])
    async with running(tmp_path, client) as rt:
        sid = rt.test_session
        await rt.sessions.prompt(sid, prompt=prompt("go"))
        await rt.sessions.wait_idle(sid)
        for call in ("h1", "c1"):
            state = (await _tool(rt, sid, call)).state
            assert isinstance(state, m.ToolError) and "cut short" in state.error.message
        assert rt.test_gates.started == []
        await rt.sessions.prompt(sid, prompt=prompt("again"))
        await rt.sessions.wait_idle(sid)
    assert request_problems(client.requests[-1]) == []


async def test_an_interrupt_during_the_final_write_of_a_turn_loses_nothing(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, llm.ScriptedLLM([])) as rt:
        sid, execution = rt.test_session, rt.execution
        entered, release = trio.Event(), trio.Event()

        async def append(events: list[ev.DurableEvent]) -> list[ev.InputAdmitted]:
            if any(isinstance(e, ev.StepEnded) for e in events):
                entered.set()
                await release.wait()
            await rt.storage.write(Append(session_id=sid, events=events))
            return []

        directory = str(tmp_path / "work")
        turn = Turn(
            session_id=sid, assistant_id="msg_turn", agent=BUILD, model=execution.default_model,
            append=append, hub=execution.hub, now=lambda: 1,
            registry=(await execution.location(directory)).registry, directory=directory,
        )  # fmt: skip
        request = llm.LLMRequest(
            model=llm.ModelRef(provider_id="p", model_id="m"), system=[], messages=[]
        )
        client = llm.ScriptedLLM([answer("the whole answer")])
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    functools.partial(run_turn, client=client, request=request, turn=turn)
                )
                await entered.wait()
                scope.cancel()  # the interrupt lands while the turn's last batch is written
                release.set()
        # The batch was written whole; the cancellation is for the caller's next checkpoint.
        [message] = await _assistants(rt, sid)
        assert [p.text for p in message.content if isinstance(p, m.AssistantText)] == [
            "the whole answer"
        ]
        assert message.finish == "stop"  # the answer was complete, and ends once
