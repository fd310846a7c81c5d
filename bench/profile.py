"""Where a prompt's CPU goes in the served process, stage by stage.

Run: .venv/bin/python bench/profile.py [--rounds 5] [--prompts 300] [--concurrent 20]
                                       [--no-sequential] [--rate 1000] [--client-nice 10]
                                       [--telemetry default|off|RATE] [--leaves N] [--raw DIR]
                                       [--tree DIR]

The server is ``bench/gateway.py``'s (``--serve``: a runtime on a temporary DuckDB store,
Hypercorn's trio worker, the zero-latency OpenAI-compatible mock reached through the real
``ProviderClient``), with telemetry as ``kittiwake serve`` has it by default (``--telemetry
default``: on, the default sampling), off, or sampled at another rate. The client is the
benchmark's lean keep-alive client; it and the mock run at ``--client-nice`` and every
thread of the server at 0, so a client woken by the server's write rarely preempts it.

Each round sends ``--prompts`` sequential prompts (``POST /prompt`` then ``POST /wait``; a
new session every ``HISTORY``, as a provider request carries the session's history;
``--no-sequential`` leaves them out), then as many again spread over ``--concurrent`` new
sessions at once (0: none), while ``py-spy record --nonblocking --gil`` samples the
server's threads that hold the GIL (``--rate`` a second). Each thread's CPU time over the
round (user plus system, from ``/proc``) is what is shared out:

- the writer threads' (``ROLES``: the journal's sync thread, the DuckDB applier, the
  telemetry writer) is their stage's, whole: their samples miss what DuckDB and fdatasync
  do without the GIL;
- any other thread's is shared among the stages of its samples: a stack's stage is that of
  its leaf-most frame outside trio, h11 and the standard library (``RULES``, first match),
  so a socket write counts for whoever wrote; samples where a thread hands work to
  another (``HANDOFFS``) are left out, as stalls (a thread that wakes another is often
  preempted right there, still holding the GIL, at about 12 us of CPU per hand-off).

The table gives, per stage, the median over the rounds of its CPU per prompt and share,
then each thread's CPU per prompt. Each round also prints the time the server's threads
were runnable but waiting for a CPU (``/proc/.../schedstat``): the load's share. py-spy's
own CPU is its process's, not the server's, but it shares the two cores.

``--tree DIR`` serves the runtime of another checkout (its ``actors``, ``gateway``,
``runtime`` and ``storage``) with this checkout's benchmark, client and mock, so two trees
are compared by the same measurement (``git worktree add``, then alternate the runs).

Needs ``py-spy`` (the ``dev`` extra) and the right to trace the server and renice its
threads (root; or ``kernel.yama.ptrace_scope`` 0 and ``--client-nice 0``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Final

import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._lean import LeanClient, free_port  # noqa: E402 - the root is on the path first
from bench.gateway import _PROMPT_BODY, _child  # noqa: E402

PY_SPY: Final = Path(sys.executable).with_name("py-spy")

# A sampled stack's stage is decided by its leaf-most frame that is not "transparent" (trio,
# outcome, h11, the standard library: code every stage runs through): the first rule below
# whose path part (and function name part, when given) that frame has. A stack with no such
# frame is its thread's: the event loop's own work on the main thread ("trio scheduling and
# I/O"), the writer threads' waiting and waking ("storage pipeline").
RULES: Final[tuple[tuple[str, str, str], ...]] = (
    # (stage, path part, function name part)
    ("telemetry", "opentelemetry/", ""),
    ("telemetry", "runtime/_telemetry.py", ""),
    ("telemetry", "runtime/_recorded.py", ""),
    ("telemetry", "runtime/_sampling.py", ""),
    ("telemetry", "storage/_telemetry.py", ""),
    ("telemetry", "storage/_telemetry_options.py", ""),
    ("telemetry", "gateway/operator/_telemetry.py", ""),
    ("telemetry", "gateway/http/_traced.py", ""),
    ("telemetry", "actors/store/_telemetry.py", ""),
    ("telemetry", "actors/store/_sdk_spans.py", ""),
    ("HTTP framing (Hypercorn, ASGI)", "hypercorn/", ""),
    ("HTTP framing (Hypercorn, ASGI)", "gateway/http/_serve.py", ""),
    ("journal (append, fdatasync)", "storage/_journal.py", ""),
    ("journal (append, fdatasync)", "storage/_segments.py", ""),
    ("store apply (DuckDB)", "storage/_worker.py", "_apply"),
    ("store apply (DuckDB)", "storage/_rows.py", ""),
    ("storage pipeline (store actor, batches, caches)", "storage/", ""),
    ("storage pipeline (store actor, batches, caches)", "actors/store/", ""),
    ("admission", "actors/api/_sessions.py", ""),
    ("admission", "actors/session/_opening.py", ""),
    ("admission", "runtime/_inbox.py", ""),
    ("provider request + stream decode", "runtime/llm/", ""),
    ("provider request + stream decode", "httpx/", ""),
    ("provider request + stream decode", "httpcore/", ""),
    ("events, hub, live views", "runtime/events.py", ""),
    ("events, hub, live views", "runtime/_live.py", ""),
    ("events, hub, live views", "actors/kernel/_events.py", ""),
    ("events, hub, live views", "gateway/opencode/_v1_live.py", ""),
    ("events, hub, live views", "gateway/opencode/_v1_events.py", ""),
    ("events, hub, live views", "gateway/http/_streams.py", ""),
    ("actor kernel (mailboxes, supervision)", "actors/kernel/", ""),
    ("route, body decode, answer encode", "gateway/", ""),
    ("drain (turn, fold, projection)", "actors/", ""),
    ("drain (turn, fold, projection)", "runtime/", ""),
)
TRANSPARENT: Final = ("packages/trio/", "packages/outcome/", "packages/h11/", "packages/sniffio/",
                      "<attrs generated", "<frozen ")  # fmt: skip
"""Frames of these (and of the standard library) never decide a stage."""
HANDOFF: Final = "thread hand-offs (waking a thread, waiting for one)"
HANDOFF_CPU_US: Final = 12
"""The CPU a hand-off costs its caller (a pykka ``tell`` to a sleeping thread: 11-13 us)."""
HANDOFFS: Final = (
    ("threading.py", "Condition."), ("threading.py", "Event.wait"), ("queue.py", "Queue."),
    ("_wakeup_socketpair.py", "wakeup_thread_and_signal_safe"),
)  # fmt: skip
"""Where one thread hands work to another (pykka's queue, the writer threads' conditions,
trio's wake-up socket): a stack through one of these, leaf-ward of any deciding frame, is a
hand-off. A thread that wakes another is often preempted right there by the thread it woke,
holding the GIL (so py-spy's ``--gil`` samples keep it), and a hand-off costs its caller
about ``HANDOFF_CPU_US`` of CPU, far less than its samples suggest: its samples take no
share of the thread's CPU (they are counted and reported apart, as stalls)."""
ROLES: Final = (
    ("kittiwake-sync", "journal (append, fdatasync)"),
    ("kittiwake-applier", "store apply (DuckDB)"),
    ("kittiwake-telemetry", "telemetry"),
)
"""Threads that do one stage's work: all their CPU is that stage's (their samples, taken
while they hold the GIL, miss the work DuckDB and fdatasync do without it)."""
MAIN_THREAD: Final = "trio scheduling and I/O"
OTHER_THREAD: Final = "storage pipeline (store actor, batches, caches)"
STAGES: Final = tuple(dict.fromkeys([*(stage for stage, _, _ in RULES), HANDOFF, MAIN_THREAD]))


def stage_of(frames: list[str], main: bool) -> str:
    """The stage of one stack (frames ``function (path:line)`` from the root)."""
    for frame in reversed(frames):
        function, _, where = frame.partition(" (")
        if any(path in where and name in function for path, name in HANDOFFS):
            return HANDOFF
        if any(part in where for part in TRANSPARENT) or "bench/" in where:
            continue
        if "/lib/python3" in where and "-packages/" not in where:  # the standard library
            continue
        for stage, path, name in RULES:
            if path in where and name in function:
                return stage
    return MAIN_THREAD if main else OTHER_THREAD


def _thread_wait(pid: int) -> dict[int, float]:
    """Seconds each thread of *pid* spent runnable but waiting for a CPU (schedstat)."""
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:  # the thread ended
            continue
        out[int(task.name)] = int(fields[1]) / 1e9
    return out


def _server_first(pid: int) -> None:
    """Every thread of the server at nice 0 while this process (the client) and the mock
    run at the nice they were started with: a client woken by the server's write then
    rarely takes the CPU from it (the server's samples there would cost it nothing)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.setpriority(os.PRIO_PROCESS, int(task.name), 0)


def _thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user plus system) of each thread of *pid*, by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


HISTORY: Final = 50
"""Prompts per session: a provider request carries the session's history, so a longer one
costs more per prompt (``bench/gateway.py`` sends 55 to one session)."""


async def _session(client: LeanClient) -> str:
    answer = msgspec.json.decode(await client.post("/api/session", b"{}"))
    return str(answer["data"]["id"])


async def _drive(url: str, prompts: int, concurrent: int, sequential: bool = True) -> None:
    """*prompts* sequential prompts, a new session every ``HISTORY``, then as many again
    spread over *concurrent* new sessions at once; each phase on new keep-alive
    connections (an idle one is closed after 5 s)."""
    first = await LeanClient.open(url)
    for number in range(prompts if sequential else 0):
        if number % HISTORY == 0:
            sid = await _session(first)
        await first.post(f"/api/session/{sid}/prompt", _PROMPT_BODY)
        await first.post(f"/api/session/{sid}/wait")
    await first.aclose()
    per = max(1, prompts // concurrent) if concurrent else 0

    async def one() -> None:
        client = await LeanClient.open(url)
        sid = await _session(client)
        for _ in range(per):
            await client.post(f"/api/session/{sid}/prompt", _PROMPT_BODY)
            await client.post(f"/api/session/{sid}/wait")
        await client.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(concurrent):
            nursery.start_soon(one)


Round = tuple[int, dict[str, float], Counter[str], dict[str, float]]
"""One round: prompts sent, CPU seconds by stage, samples by stage and leaf frame, and CPU
seconds by thread name."""


async def _profile(args: argparse.Namespace) -> list[Round]:
    if args.telemetry != "off":
        os.environ["KITTIWAKE_BENCH_TELEMETRY"] = "1"
        if args.telemetry != "default":
            os.environ["KITTIWAKE_BENCH_SAMPLE"] = args.telemetry
    rounds: list[Round] = []
    mock_port = free_port()
    mock = f"http://127.0.0.1:{mock_port}"
    async with _child(["--mock-openai", str(mock_port)], mock, "/"):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            async with _child(["--serve", str(port), tmp, mock], url, "/api/health") as pid:
                if args.client_nice:
                    _server_first(pid)
                await _drive(url, 20, args.concurrent)  # warm up
                for number in range(args.rounds):
                    out = Path(args.raw or tmp) / f"round{number}.txt"
                    spy = await trio.lowlevel.open_process(
                        [str(PY_SPY), "record", "--pid", str(pid), "--rate", str(args.rate),
                         "--format", "raw", "--nonblocking", "--threads", "--full-filenames", "--gil",
                         "--output", str(out)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )  # fmt: skip
                    await trio.sleep(1.0)  # py-spy attaches
                    before, waited = _thread_cpu(pid), _thread_wait(pid)
                    started = time.perf_counter()
                    await _drive(url, args.prompts, args.concurrent, not args.no_sequential)
                    after = _thread_cpu(pid)
                    queued = sum(_thread_wait(pid).values()) - sum(waited.values())
                    wall = time.perf_counter() - started
                    spy.send_signal(signal.SIGINT)
                    await spy.wait()
                    sent = args.prompts * (not args.no_sequential) + (
                        args.prompts // args.concurrent * args.concurrent if args.concurrent else 0
                    )
                    spent = {t: after[t] - before.get(t, 0.0) for t in after}
                    cpu, leaves, threads = _attribute(out, spent, pid)
                    rounds.append((sent, cpu, leaves, threads))
                    print(f"round {number + 1}: {sent} prompts, server CPU "
                          f"{sum(cpu.values()) / sent * 1000:.2f} ms/prompt, runnable but "
                          f"waiting for a CPU {queued / sent * 1000:.2f} ms/prompt, wall "
                          f"{wall:.1f} s, load average {os.getloadavg()[0]:.1f}",
                          flush=True)  # fmt: skip
    return rounds


NATIVE: Final = "threads without Python frames (DuckDB's own)"


def _attribute(
    out: Path, spent: dict[int, float], main: int
) -> tuple[dict[str, float], Counter[str], dict[str, float]]:
    """Each thread's CPU seconds *spent* shared among the stages of its sampled stacks;
    also each thread name's CPU seconds."""
    by_thread: dict[int, Counter[str]] = {}
    names: dict[int, str] = {}
    leaves: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack.startswith("thread ("):
            continue
        frames = stack.split(";")
        tid = int(frames[0].split("(", 1)[1].split(")", 1)[0])
        names[tid] = frames[0].partition(": ")[2]
        stage = stage_of(frames[1:], tid == main)
        by_thread.setdefault(tid, Counter())[stage] += int(count)
        leaves[f"{stage} | {frames[-1]}"] += int(count)
    cpu: dict[str, float] = {}
    for tid, seconds in spent.items():
        role = next(
            (stage for prefix, stage in ROLES if names.get(tid, "").startswith(prefix)), None
        )
        if role is not None:
            cpu[role] = cpu.get(role, 0.0) + seconds
            continue
        samples = by_thread.get(tid)
        if not samples:
            cpu[NATIVE] = cpu.get(NATIVE, 0.0) + seconds
            continue
        total = sum(n for stage, n in samples.items() if stage != HANDOFF)
        for stage, n in samples.items():
            if stage != HANDOFF and total:
                cpu[stage] = cpu.get(stage, 0.0) + seconds * n / total
    threads: dict[str, float] = {}
    for tid, seconds in spent.items():
        name = names.get(tid, "(no Python frames sampled)")
        threads[name] = threads.get(name, 0.0) + seconds
    return cpu, leaves, threads


def _report(rounds: list[Round], args: argparse.Namespace) -> None:
    per_prompt = [sum(cpu.values()) / sent * 1000 for sent, cpu, _, _ in rounds]
    print(f"\nserver CPU per prompt: median {statistics.median(per_prompt):.2f} ms "
          f"(rounds: {', '.join(f'{v:.2f}' for v in per_prompt)})")  # fmt: skip
    print("| stage | CPU ms per prompt | share |\n|---|---:|---:|")
    rows = []
    for name in (*STAGES, NATIVE):
        ms = [cpu.get(name, 0.0) / sent * 1000 for sent, cpu, _, _ in rounds]
        shares = [cpu.get(name, 0.0) / sum(cpu.values()) for _, cpu, _, _ in rounds]
        rows.append((statistics.median(ms), statistics.median(shares), name))
    for ms_median, share, name in sorted(rows, reverse=True):
        if name != HANDOFF:
            print(f"| {name} | {ms_median:.2f} | {share:.0%} |")
    stalls = [
        sum(n for leaf, n in leaves.items() if leaf.startswith(HANDOFF))
        / max(1, sum(leaves.values()))
        for _, _, leaves, _ in rounds
    ]
    print(f"\nsamples stalled at thread hand-offs (not counted as CPU): median "
          f"{statistics.median(stalls):.0%} of all samples")  # fmt: skip
    print("\n| thread | CPU ms per prompt |\n|---|---:|")
    thread_names = sorted({name for *_, threads in rounds for name in threads})
    by_name = [
        (statistics.median(t.get(n, 0.0) / sent * 1000 for sent, _, _, t in rounds), n)
        for n in thread_names
    ]
    for ms_median, name in sorted(by_name, reverse=True):
        print(f"| {name} | {ms_median:.2f} |")
    if args.leaves:
        total: Counter[str] = Counter()
        for _, _, leaves, _ in rounds:
            total.update(leaves)
        all_samples = sum(total.values())
        print(f"\ntop {args.leaves} leaf frames (share of the samples, not of the CPU):")
        for leaf, n in total.most_common(args.leaves):
            print(f"  {n / all_samples:6.1%}  {leaf}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--telemetry", default="default")
    parser.add_argument("--leaves", type=int, default=0)
    parser.add_argument("--raw", help="a directory to keep py-spy's raw stacks in")
    parser.add_argument("--tree", help="serve the runtime of this checkout instead of this one")
    parser.add_argument(
        "--no-sequential", action="store_true", help="only the sessions at once in each round"
    )
    parser.add_argument(
        "--client-nice", type=int, default=10,
        help="nice of the client and the mock (the server's threads are set to 0; 0: as is)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.tree:  # the server child reads it (bench/gateway.py)
        os.environ["KITTIWAKE_BENCH_TREE"] = str(Path(args.tree).resolve())
    if args.client_nice:
        os.nice(args.client_nice)  # the children (mock, server) start with it too
    _report(trio.run(_profile, args), args)


if __name__ == "__main__":
    main()
