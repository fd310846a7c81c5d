"""The simulated world around one runtime: the clock, the provider, the tools, the disk.

Everything here is driven by seeded random streams and trio's mock clock. The provider
renders each answer as Anthropic's SSE wire format and decodes it with the real decoders,
so cut, stalled and malformed streams reach the runtime exactly as a network would
deliver them; HTTP errors go through the real classifier and retry policy.
"""

from __future__ import annotations

import datetime
import errno
import os
import random
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import msgspec
import trio

from runtime import IdGenerator, llm
from runtime.agents import BUILD, GENERAL, PLAN, AgentInfo, PermissionRule
from runtime.context import SystemContext, SystemContextRegistry, date_source, environment_source
from runtime.tools import Tool, ToolContext, ToolEnvironment, ToolError, ToolOutput, ToolRegistry
from runtime.tools.testing import testing_registry
from sims._faults import FaultPlan
from sims._questions import question_call
from sims._tasks import SUBAGENT, earlier_tasks, task_call
from sims._workload import Features
from storage import JournalFiles

__all__ = ["BASE_MS", "SimFiles", "SimProvider", "World", "sim_agents"]

BASE_MS = 1_800_000_000_000  # 2027-01-15
IDLE_TIMEOUT = 30.0  # the provider stream's idle gap before it counts as stalled
HUGE_OUTPUT = 120_000  # characters: past the Model Tool Output limit, so it is managed
MAX_TURNS = 4


def sim_agents(features: Features = Features()) -> dict[str, AgentInfo]:
    """``build`` and ``plan`` (and with tasks the subagent ``general``), each asking before
    ``deploy`` (so permission asks carry the issuing turn's agent), with a small
    provider-turn allowance so the cap is reached."""
    ask = PermissionRule(permission="deploy", action="ask")
    agents = {
        "build": msgspec.structs.replace(BUILD, steps=MAX_TURNS, permission=[*BUILD.permission, ask]),
        "plan": msgspec.structs.replace(PLAN, steps=MAX_TURNS + 1, permission=[*PLAN.permission, ask]),
    }  # fmt: skip
    if features.tasks:
        agents[SUBAGENT] = msgspec.structs.replace(
            GENERAL, steps=MAX_TURNS, permission=[*GENERAL.permission, ask]
        )
    return agents


class World:
    """One seed's world: random streams, fault plan, clock offset, ledgers and trace."""

    def __init__(
        self, seed: int, plan: FaultPlan, data_dir: Path, *, trace: bool = True,
        features: Features = Features(),
    ) -> None:  # fmt: skip
        self.seed = seed
        self.plan = plan
        self.data_dir = data_dir
        self.provider_rng = random.Random(f"{seed}/provider")
        self.tool_rng = random.Random(f"{seed}/tools")
        self.question_rng = random.Random(f"{seed}/questions")
        self.task_rng = random.Random(f"{seed}/tasks")
        self.features = features
        self.disk_rng = random.Random(f"{seed}/disk")
        self.ids = IdGenerator(clock_ms=self.now_ms, rng=random.Random(f"{seed}/ids"))
        self.event_ids = IdGenerator(clock_ms=self.now_ms, rng=random.Random(f"{seed}/evt"))
        self.offset_ms = 0
        self.injected: Counter[str] = Counter()
        self.lines: list[str] = [] if trace else []
        self._trace = trace
        self.faults_over = False
        self.faults_over_event = trio.Event()
        self.generation = 0
        self.dead = False
        self.executions: Counter[tuple[str, str]] = Counter()
        self.running: dict[tuple[str, str], int] = {}
        self.cut_at_crash: set[tuple[str, str]] = set()
        # (session, baseline, (generation, store opening, checkpoint the request starts at))
        self.requests: list[tuple[str, str, tuple[int, int, int]]] = []
        self.incarnation: Callable[[], int] = lambda: 0  # store restarts in this generation
        self.notes: dict[str, int] = {}  # Location directory -> version of its notes source
        self.call_counter = 0
        self.output_blocked = False
        # Compaction pressure in half the seeds: a window a few turns fill.
        pressure = random.Random(f"{seed}/window")
        under = features.compaction and pressure.random() < 0.5
        self.window = 20_000 + pressure.randint(6_000, 16_000) if under else 0

    # -- time and trace ---------------------------------------------------------------

    def now_ms(self) -> int:
        return BASE_MS + int(trio.current_time() * 1000) + self.offset_ms

    def log(self, line: str) -> None:
        if self._trace:
            self.lines.append(f"{trio.current_time():10.3f} {line}")

    def inject(self, kind: str, detail: str = "") -> None:
        self.injected[kind] += 1
        self.log(f"fault {kind} {detail}".rstrip())

    def stop_faults(self) -> None:
        self.faults_over = True
        self.faults_over_event.set()

    def fault(self, group: str, rng: random.Random) -> str | None:
        return None if self.faults_over else self.plan.pick(group, rng)

    def disk_fault(self) -> str | None:
        """A failed fdatasync or a full disk at one journal operation (a tenth of the
        seed's rate: each one restarts the store)."""
        if self.faults_over:
            return None
        kind = self.plan.pick("storage", self.disk_rng, rate=self.plan.rate / 10)
        return kind if kind in ("storage.fsync", "storage.full") else None

    # -- context --------------------------------------------------------------------

    def context(self, directory: str) -> SystemContextRegistry:
        """Environment and date (from the simulated clock), and a per-Location notes
        source whose value the workload changes."""
        registry = SystemContextRegistry()

        async def builtins() -> list[SystemContext]:
            day = datetime.datetime.fromtimestamp(self.now_ms() / 1000, tz=datetime.UTC).date()
            environment = environment_source(
                directory=directory, workspace_root=directory, platform="linux", is_git_repo=False
            )
            return [environment, date_source(today=lambda: day)]

        async def notes() -> SystemContext:
            version = self.notes.get(directory, 0)
            return SystemContext.loaded(
                "sim/notes", int, version,
                baseline=lambda v: f"Project notes, revision {v}.",
                update=lambda v: f"Project notes are now at revision {v}.",
            )  # fmt: skip

        registry.contribute("core/builtins", builtins)
        registry.contribute("sim/notes", notes)
        return registry

    # -- tools ------------------------------------------------------------------------

    def tools(self, env: ToolEnvironment) -> ToolRegistry:
        env = msgspec.structs.replace(env, offload_io=False, clock=lambda: self.now_ms() / 1000)
        registry, _ = testing_registry(env)
        registry.contribute(
            [
                Tool(name="work", description="Work for a while.", input_type=WorkInput,
                     handler=self._work),
                Tool(name="deploy", description="Deploy (asks first).", input_type=WorkInput,
                     handler=self._work, permission="deploy"),
            ]
        )  # fmt: skip
        return registry

    async def _work(self, data: WorkInput, ctx: ToolContext, env: ToolEnvironment) -> ToolOutput:
        key = (ctx.session_id, ctx.tool_call_id)
        if self.dead:
            await trio.sleep_forever()  # the process is gone: nothing runs any more
        self.executions[key] += 1
        self.running[key] = self.generation
        self.log(f"tool start {ctx.tool_call_id} {data.mode} {data.seconds:.2f}s")
        try:
            return await self._perform(data, ctx)
        finally:
            self.running.pop(key, None)

    async def _perform(self, data: WorkInput, ctx: ToolContext) -> ToolOutput:
        if data.mode == "hang":
            # Until faults stop (then it answers): a hang that outlives the fault phase
            # would make liveness untestable.
            await self.faults_over_event.wait()
            await trio.sleep(data.seconds)
        elif data.mode == "slow":
            await trio.sleep(data.seconds * 20)
        else:
            await trio.sleep(data.seconds)
        if data.mode == "raise":
            raise ToolError(f"work failed on purpose ({ctx.tool_call_id})")
        if data.mode == "crash":
            raise RuntimeError(f"work crashed ({ctx.tool_call_id})")
        text = f"done {ctx.tool_call_id}"
        if data.mode == "huge":
            text = (text + " " + "x" * 99 + "\n") * (HUGE_OUTPUT // 100)
        return ToolOutput(content=[llm.TextPart(text=text)])

    async def rerun(self, data: dict[str, Any], ctx: ToolContext) -> None:
        """Run a call's handler again (only a broken runtime does: ``sims._planted``)."""
        if "seconds" in data:
            await self._work(msgspec.convert(data, WorkInput), ctx, None)  # type: ignore[arg-type]

    def block_output(self, blocked: bool) -> None:
        """Put a file where the Managed Tool Output directory belongs (writes there fail
        with ENOTDIR), or take it away."""
        path = self.data_dir / "tool-output"
        if blocked and not path.exists():
            path.write_bytes(b"")
        elif not blocked and path.is_file():
            path.unlink()
        self.output_blocked = blocked


class WorkInput(msgspec.Struct, frozen=True, kw_only=True):
    """Input of ``work`` and ``deploy``: how long, and how it behaves."""

    seconds: float
    mode: str = "ok"


class SimProvider:
    """An LLMClient answering from the world's provider stream, through the wire format."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.requests = 0

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        w = self.w
        if w.dead:
            await trio.sleep_forever()
        sid = request.prompt_cache_key or ""
        store = (w.generation, w.incarnation(), _checkpoint(request))
        w.requests.append((sid, request.system[-1] if request.system else "", store))
        self.requests += 1
        policy = llm.RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=8.0)
        rng = random.Random(w.provider_rng.getrandbits(32))
        attempts = llm.stream_with_retry(lambda: self._attempt(request), policy, rng=rng)
        async with aclosing(attempts):
            async for event in attempts:
                yield event

    async def _attempt(self, request: llm.LLMRequest) -> AsyncIterator[llm.LLMEvent]:
        w, rng = self.w, self.w.provider_rng
        await trio.sleep(rng.uniform(0.05, 0.6))
        fault = w.fault("provider", rng)
        if fault in ("provider.429", "provider.5xx", "provider.overflow"):
            w.inject(fault)
            yield _http_error(fault, rng)
            return
        body = llm.render_stream(self._script(request), "anthropic-messages")
        if fault == "provider.cut":
            body = body[: rng.randrange(1, len(body))]
        elif fault == "provider.malformed":
            frames = body.split(b"\n\n")
            index = rng.randrange(len(frames))
            frames[index] = frames[index].replace(b'"', b"'", 1).replace(b"{", b"{{", 1)
            body = b"\n\n".join(frames)
        if fault is not None:
            w.inject(fault)
        stall_at = rng.randrange(len(body)) if fault == "provider.stall" else -1
        async with aclosing(_decode(body, stall_at, rng)) as events:
            async for event in events:
                yield event

    def model_limit(self, model: Any) -> Any:
        """A small context window when the seed puts sessions under compaction pressure
        (``llm.ModelLimits``); unknown otherwise."""
        if not self.w.window:
            return None
        return llm.ModelLimit(context=self.w.window, output=4096)

    def _script(self, request: llm.LLMRequest) -> list[llm.LLMEvent]:
        w, rng = self.w, self.w.provider_rng
        events: list[llm.LLMEvent] = [llm.StepStart()]
        if rng.random() < 0.3:
            events += [llm.ReasoningStart(id="r"), llm.ReasoningDelta(id="r", delta="thinking"),
                       llm.ReasoningEnd(id="r")]  # fmt: skip
        words = " ".join(f"w{rng.randrange(100)}" for _ in range(rng.randint(1, 5)))
        events += [llm.TextStart(id="t"), llm.TextDelta(id="t", delta=words), llm.TextEnd(id="t")]
        offered = {t.name for t in request.tools} if request.tool_choice != "none" else set()
        calls = []
        if offered and not w.faults_over and rng.random() < 0.6:
            earlier = earlier_tasks(request) if w.features.tasks else []
            for _ in range(rng.randint(1, 3)):
                w.call_counter += 1
                calls.append(self._call(f"call_{w.call_counter}", offered, earlier))
        events += calls
        size = sum(len(msgspec.json.encode(message)) for message in request.messages) // 4
        usage = llm.Usage(
            input_tokens=size + rng.randint(500, 2000), output_tokens=rng.randint(1, 50)
        )
        events.append(llm.StepFinish(finish_reason="tool-calls" if calls else "stop", usage=usage))
        return events

    def _call(self, call_id: str, offered: set[str], earlier: list[str]) -> llm.ToolCall:
        w, rng = self.w, self.w.tool_rng
        if w.features.questions:
            asking = question_call(w.question_rng, call_id, offered)
            if asking is not None:
                w.log(f"model asks with {asking.name} {call_id}")
                return asking
        if w.features.tasks:
            task = task_call(w.task_rng, call_id, offered, earlier)
            if task is not None:
                resumed = task.input.get("task_id")
                w.log(
                    f"model {f'continues task {resumed}' if resumed else 'starts a task'} {call_id}"
                )
                return task
        name = rng.choice(["work", "work", "work", "deploy", "echo"])
        if name not in offered:
            name = "echo"
        if name == "echo":
            return llm.ToolCall(call_id=call_id, name="echo", input={"text": "hi"})
        seconds = round(rng.choice([0.0, rng.uniform(0, 0.5), rng.uniform(0, 8)]), 3)
        mode = "ok"
        fault = w.fault("tool", rng)
        if fault == "tool.output_write":
            w.inject(fault, call_id)
            mode = "huge"
            w.block_output(True)
        elif fault is not None:
            w.inject(fault, call_id)
            mode = fault.removeprefix("tool.")
        elif rng.random() < 0.05:
            mode = "huge"
        return llm.ToolCall(call_id=call_id, name=name, input={"seconds": seconds, "mode": mode})


def _checkpoint(request: llm.LLMRequest) -> int:
    """Which compaction checkpoint *request* starts at (0: none); a new Context Epoch may
    start only with a new checkpoint."""
    if request.messages and isinstance(request.messages[0], llm.UserMessage):
        for part in request.messages[0].content:
            if isinstance(part, llm.TextPart) and part.text.startswith("<conversation-checkpoint>"):
                return zlib.crc32(part.text.encode()) or 1
    return 0


def _http_error(kind: str, rng: random.Random) -> llm.ProviderError:
    if kind == "provider.429":
        after = str(rng.randint(1, 5))
        body = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
        return llm.classify_http_error(429, body, {"retry-after": after})
    if kind == "provider.5xx":
        body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
        return llm.classify_http_error(rng.choice([500, 502, 503, 529]), body, {})
    body = b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}'
    return llm.classify_http_error(400, body, {})


async def _decode(body: bytes, stall_at: int, rng: random.Random) -> AsyncIterator[llm.LLMEvent]:
    """Deliver *body* in random chunks through the real SSE and Anthropic decoders, with
    the transport's rules: an idle gap past the timeout and an undecodable frame end
    the stream as a classified ``ProviderError``."""
    sse = llm.SSEDecoder(max_frame_bytes=1 << 20)
    decoder = llm.AnthropicDecoder()
    offset = 0
    try:
        while offset < len(body):
            size = rng.randint(16, 400)
            chunk = body[offset : offset + size]
            with trio.fail_after(IDLE_TIMEOUT):
                if offset <= stall_at < offset + size:
                    await trio.sleep(IDLE_TIMEOUT * 2)
                await trio.sleep(rng.choice([0.0, 0.0, 0.01, 0.05]))
            offset += size
            for frame in sse.feed(chunk):
                for event in decoder.feed(frame):
                    yield event
        for frame in sse.close():
            for event in decoder.feed(frame):
                yield event
        for event in decoder.finish():
            yield event
    except trio.TooSlowError as exc:
        yield llm.classify_transport_error(exc)
    except (msgspec.DecodeError, llm.FrameTooLargeError, KeyError, TypeError, ValueError) as exc:
        yield llm.ProviderError(kind="terminal", message=f"undecodable provider stream: {exc}")


class SimFiles(JournalFiles):
    """The journal's file operations with faults: a failed fdatasync, a full disk, and a
    process crash at a chosen commit point (optionally cutting the unsynced tail).

    ``commit_points`` counts record writes and fdatasyncs, before and after each; when it
    reaches ``crash_at`` the world is marked dead and *on_crash* is called (it copies the
    files as a kill, or with ``torn`` a power loss, leaves them, and cancels the
    simulated process). A dead process's operations reach no disk.
    """

    def __init__(self, world: World, on_crash: Callable[[], None]) -> None:
        self.w = world
        self.on_crash = on_crash
        self.commit_points = 0
        self.crash_at = -1
        self.synced: dict[int, int] = {}  # by inode: the end of the synced records
        self.written: dict[int, int] = {}  # by inode: the end of the written records
        self.paths: dict[int, str] = {}

    def _file(self, fd: int, offset: int | None = None) -> int:
        inode = os.fstat(fd).st_ino
        if inode not in self.paths:
            # First seen in this process: what the file holds up to here was there when
            # the journal opened (synced by the process before, or kept by its kill).
            self.paths[inode] = os.readlink(f"/proc/self/fd/{fd}")
            start = offset if offset is not None else os.fstat(fd).st_size
            self.synced.setdefault(inode, start)
            self.written.setdefault(inode, start)
        return inode

    def _point(self) -> bool:
        """Count a commit point; True when the process dies here."""
        self.commit_points += 1
        if self.commit_points == self.crash_at and not self.w.faults_over:
            self.w.dead = True
            self.on_crash()
            return True
        return False

    def pwrite(self, fd: int, data: Any, offset: int) -> int:  # type: ignore[override]
        if self.w.dead:
            return len(data)
        record = len(data) > 0 and bytes(data[:1]) != b"\x00"
        if record:
            if self._point():
                return len(data)
            if self.w.disk_fault() == "storage.full":
                self.w.inject("storage.full")
                raise OSError(errno.ENOSPC, "No space left on device")
        if record:
            self._file(fd, offset)
        written = os.pwrite(fd, data, offset)
        if record:
            inode = self._file(fd)
            self.written[inode] = max(self.written.get(inode, 0), offset + written)
            self._point()
        return written

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.w.dead:
            return
        inode = self._file(fd)
        if self.written.get(inode, 0) <= self.synced.get(inode, 0):
            # Nothing written since the last sync (the journal syncs its tail at open and
            # at close): not a commit point, and no fault is drawn for it.
            os.fdatasync(fd)
            return
        if self._point():
            return
        if self.w.disk_fault() == "storage.fsync":
            inode = self._file(fd)
            synced = self.synced.get(inode, 0)
            dropped = self.w.disk_rng.random() < 0.5 and self.written.get(inode, 0) > synced
            if dropped:  # the kernel dropped the dirty pages: the unsynced records are gone
                os.ftruncate(fd, synced)
                self.written[inode] = synced
            self.w.inject("storage.fsync", "pages dropped" if dropped else "pages kept")
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)
        inode = self._file(fd)
        self.synced[inode] = self.written.get(inode, 0)
        self._point()

    def ftruncate(self, fd: int, length: int) -> None:  # type: ignore[override]
        if self.w.dead:
            return
        os.ftruncate(fd, length)
        inode = self._file(fd)
        self.written[inode] = min(self.written.get(inode, 0), length)
        self.synced[inode] = min(self.synced.get(inode, 0), length)

    def unsynced(self) -> list[tuple[str, int, int]]:
        """(path, synced end, written end) of each file with unsynced record bytes."""
        out = []
        for inode, end in sorted(self.written.items()):
            start = self.synced.get(inode, 0)
            if end > start:
                out.append((self.paths[inode], start, end))
        return out
