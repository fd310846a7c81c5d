"""One seeded simulation: the whole runtime under trio's MockClock, a workload of clients,
faults from the seed's plan, simulated crashes with reopen from disk, and the invariant
checks after every committed batch and at the end.

A simulated process is a *generation*: ``open_runtime`` over the data directory. A crash
at a journal commit point marks the world dead (nothing it does reaches a disk any more),
copies the files as a kill leaves them (the journal as written, or cut back into its
unsynced tail for a power loss; the database as it was when the generation opened, which
trails the journal as the applier's may), cancels the generation, and the next one opens
the copy. Clients carry on from the action they were at.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any, Final

import msgspec
import trio

from actors import Escalation
from runtime import Location, ModelRef, Prompt, SessionNotFoundError, StorageError, open_runtime
from sims._database import SHARED_DATABASE
from sims._end_checks import check_the_store
from sims._faults import ALL_FAULTS, choose_faults
from sims._invariants import CHECKS, Checker
from sims._planted import RERUN
from sims._questions import answer_question, give_up_questions
from sims._tasks import child_of
from sims._workload import DEFAULT_SESSIONS, Action, Features, Workload, generate
from sims._world import SimFiles, SimProvider, World, sim_agents
from sims.harness import run_seeded
from storage import AllEvents, GetSession, StoredEvent

__all__ = ["LIVENESS_BOUND", "Result", "run_seed", "scratch_root", "seed_workload"]

LIVENESS_BOUND: Final = 900.0  # simulated seconds for every session to settle once faults stop
_LOCATIONS: Final = 4
_MAX_CRASHES: Final = 2
_MAX_EXITS: Final = 5  # processes their supervisor ended; one more: the run is stuck
_MAX_EVENTS: Final = 1_000_000


class Result(msgspec.Struct, kw_only=True):
    """What one seed did: its trace, the faults injected, the checks run and what broke."""

    seed: int
    sessions: int
    faults: str
    trace: list[str]
    injected: dict[str, int]
    checks: dict[str, int]
    violations: list[str]
    crashes: int
    simulated_seconds: float
    actions: int
    errors: dict[str, int]
    compactions: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.violations)


def _first(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return str(exc)


def scratch_root() -> str | None:
    """Where runs put their files: tmpfs when the machine has it (fsyncs are free there,
    which changes nothing the simulation checks), else the default temporary directory."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def run_seed(
    seed: int, *, sessions: int = DEFAULT_SESSIONS, faults: tuple[str, ...] = ALL_FAULTS,
    workload: Workload | None = None, trace: bool = True, per_session: tuple[int, int] = (3, 9),
    features: Features = Features(),
) -> Result:  # fmt: skip
    """Run seed *seed*: its fault plan (a random subset of *faults*), its workload (or the
    given one, for shrinking) and its schedule. Deterministic: the same arguments give
    the same Result, trace included. *features* off replay the simulator from before
    they existed (older regression seeds)."""
    plan = choose_faults(random.Random(f"{seed}/plan"), faults)
    if workload is None:
        workload = seed_workload(seed, sessions, faults, per_session, features=features)
    root = Path(tempfile.mkdtemp(prefix=f"sim{seed}-", dir=scratch_root()))
    try:
        world = World(seed, plan, root / "data", trace=trace, features=features)
        sim = _Simulation(world, workload)
        RERUN[:] = [world.rerun]
        run_seeded(seed, sim.run)
        return sim.result()
    finally:
        RERUN.clear()
        SHARED_DATABASE.detach_all()  # a run that raised may have left its store open
        shutil.rmtree(root, ignore_errors=True)


def seed_workload(
    seed: int, sessions: int, faults: tuple[str, ...] = ALL_FAULTS,
    per_session: tuple[int, int] = (3, 9), *, features: Features = Features(),
) -> Workload:  # fmt: skip
    """The workload seed *seed* runs (clock changes when its fault plan has them)."""
    plan = choose_faults(random.Random(f"{seed}/plan"), faults)
    clock = (plan.enabled("clock.jump"), plan.enabled("clock.rollover"))
    return generate(random.Random(f"{seed}/workload"), sessions, per_session=per_session,
                    clock_faults=clock, features=features)  # fmt: skip


class _Client:
    """What the clients of one session know: its id, their own message ids, their acks."""

    def __init__(self, sid: str, location: str, parent: str | None = None) -> None:
        self.sid = sid
        self.location = location
        self.parent = parent  # a child session a task call created: no actions of its own
        self.created = False
        self.deleted = False
        self.deleting = False  # a deletion was sent; a crash may leave its outcome unknown
        self.own_ids: list[tuple[str, str, str]] = []  # (id, text, delivery)
        self.acked: dict[str, int] = {}  # message id -> admitted seq


class _Simulation:
    def __init__(self, world: World, workload: Workload) -> None:
        self.w = world
        self.workload = workload
        self.root = world.data_dir.parent
        self.data = world.data_dir
        agents = sim_agents(world.features)
        self.checker = Checker({name: a.steps or 0 for name, a in agents.items()})
        self.rng = random.Random(f"{world.seed}/clients")
        self.clients: list[_Client] = []
        self.next_action = 0
        self.crashes = 0
        self.published: dict[str, dict[int, str]] = {}
        self.errors: dict[str, int] = {}
        self.files: SimFiles | None = None
        self.scope: trio.CancelScope | None = None
        self.rt: Any = None
        self.done = False
        self.finished_at = 0.0
        self.exits = 0

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> None:
        w = self.w
        for index in range(self.workload.sessions):
            location = self.root / "work" / f"l{index % _LOCATIONS}"
            location.mkdir(parents=True, exist_ok=True)
            self.clients.append(_Client(w.ids.new("ses"), str(location)))
        self.data.mkdir(parents=True)
        while not self.done:
            w.generation += 1
            w.dead = False
            if w.plan.enabled("storage.crash") and self.crashes < _MAX_CRASHES:
                self._keep_database()
            await self._generation()
            for name in SHARED_DATABASE.detach_all():  # before its files are replaced
                self.checker.fail("storage.closed_at_exit", f"database {name} left open")
            if w.dead:
                self.crashes += 1
                self._restore()
        self.finished_at = trio.current_time()

    async def _generation(self) -> None:
        w = self.w
        self.files = files = SimFiles(w, self._crash)
        if w.plan.enabled("storage.crash") and self.crashes < _MAX_CRASHES:
            files.crash_at = w.disk_rng.randint(1, 60 * max(1, len(self.clients)))
        options: dict[str, Any] = dict(
            storage_mode="inline", location_loads="inline", now_ms=w.now_ms, ids=w.ids,
            tools=w.tools, context=w.context, tool_output_cleanup_every=None,
            agents=sim_agents(w.features), max_turns=4,
            store_options=dict(journal_files=files, ids=w.event_ids, database=SHARED_DATABASE,
                               backup_every=1 << 40,
                               backup_journal_bytes=1 << 50, journal_segment_bytes=64 * 1024),
        )  # fmt: skip
        w.log(f"generation {w.generation} opens")
        with trio.CancelScope() as self.scope:
            try:
                async with open_runtime(data_dir=self.data, llm=SimProvider(w), **options) as rt:
                    self.rt = rt
                    w.incarnation = lambda: rt.storage.statistics().restarts
                    await self._serve(rt)
            except Exception as exc:  # the runtime's own failure (a dead one's is expected)
                escalated = isinstance(exc, ExceptionGroup) and exc.subgroup(Escalation)
                if escalated and not w.faults_over and not w.dead:
                    # A crash loop its supervisor gave up on ends the process, as designed;
                    # the service manager starts it again on the files as they are.
                    w.log(f"generation {w.generation} exited: {_first(exc)}")
                    self.exits += 1
                    if self.exits > _MAX_EXITS:  # restarted on the same files, it never serves
                        self.checker.fail(
                            "liveness.idle_after_faults", f"{self.exits} exits: {_first(exc)}"
                        )
                        self.done = True
                elif not w.dead:
                    self.checker.fail("liveness.idle_after_faults", f"runtime raised {exc!r}")
                    self.done = True
        if w.dead:
            w.log(f"generation {w.generation} crashed")

    async def _serve(self, rt: Any) -> None:
        subscription = rt.hub.subscribe(None, max_buffer=_MAX_EVENTS)
        await self._resync(rt)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch, subscription)
            for client in self.clients:
                if not client.created:
                    await self._act(client, Action(at=0, session=-1, kind="create"))
            async with trio.open_nursery() as actions:
                while self.next_action < len(self.workload.actions):
                    action = self.workload.actions[self.next_action]
                    await trio.sleep_until(max(action.at, trio.current_time()))
                    self.next_action += 1
                    if action.kind == "clock":
                        self._clock(action.arg)
                    else:
                        actions.start_soon(self._act, self.clients[action.session], action)
            await self._settle(rt)
            self.done = True
            nursery.cancel_scope.cancel()

    def _crash(self) -> None:
        """At a commit point: the process dies (called on the trio thread, inside the
        store's journal operation)."""
        w = self.w
        assert self.files is not None
        w.inject("storage.crash", f"at commit point {self.files.commit_points}")
        w.cut_at_crash |= set(w.running)
        snap = self.root / "snapshot"
        shutil.rmtree(snap, ignore_errors=True)
        shutil.copytree(self.data / "journal", snap / "journal")
        if (self.data / "tool-output").is_dir():
            shutil.copytree(self.data / "tool-output", snap / "tool-output")
        if w.plan.enabled("storage.torn"):
            for path, synced, written in self.files.unsynced():
                target = snap / "journal" / Path(path).name
                if target.exists() and w.disk_rng.random() < 0.7:
                    cut = w.disk_rng.randint(synced, written - 1)
                    os.truncate(target, cut)
                    w.inject("storage.torn", f"{Path(path).name} cut at {cut} of {written}")
        assert self.scope is not None
        self.scope.cancel()

    def _keep_database(self) -> None:
        """Copy the database files as the generation finds them: a crash leaves them so
        (the applier may trail the journal; here by the whole generation)."""
        keep = self.root / "database"
        shutil.rmtree(keep, ignore_errors=True)
        keep.mkdir()
        for path in self.data.glob("kittiwake.duckdb*"):
            shutil.copy2(path, keep / path.name)

    def _restore(self) -> None:
        shutil.rmtree(self.data)
        self.data.mkdir()
        snap = self.root / "snapshot"
        shutil.copytree(snap / "journal", self.data / "journal")
        if (snap / "tool-output").is_dir():
            shutil.copytree(snap / "tool-output", self.data / "tool-output")
        for path in (self.root / "database").iterdir():
            shutil.copy2(path, self.data / path.name)
        shutil.rmtree(snap)

    # -- checks -------------------------------------------------------------------------

    async def _resync(self, rt: Any) -> None:
        """After (re)opening: every event published before must still be there, and the
        step checks start over from the durable log."""
        events: list[StoredEvent] = await self._read(AllEvents())
        by_session: dict[str, dict[int, str]] = {}
        for e in events:
            by_session.setdefault(e.aggregate_id, {})[e.seq] = e.id
        await self._resolve_deletions("in flight at the crash")
        deleted = {sid for sid, s in self.checker.sessions.items() if s.deleted}
        deleted |= {c.sid for c in self.clients if c.deleted}
        for sid, seen in self.published.items():
            if sid in deleted:
                continue
            now = by_session.get(sid, {})
            self.checker.checks["events.published_survive_crash"] += len(seen)
            lost = [seq for seq, eid in seen.items() if now.get(seq) != eid]
            if lost:
                self.checker.fail(
                    "events.published_survive_crash", f"{sid} lost published seqs {lost[:5]}"
                )
        old = self.checker
        self.checker = Checker(old.caps)
        self.checker.checks = old.checks
        self.checker.violations = old.violations
        self.checker.feed(events)
        self.checker.compactions = old.compactions
        for event in events:
            self._adopt(event)
        self.published = by_session

    async def _resolve_deletions(self, why: str) -> None:
        """Deletions whose outcome the client does not know (in flight at a crash, or
        reported failed though their write may have reached the file): the store says."""
        for client in self.clients:
            if (client.deleting or client.parent) and not client.deleted:
                if await self._read(GetSession(session_id=client.sid)) is None:
                    client.deleted = True
                    how = "with its parent" if client.parent else f"{why}: kept"
                    self.w.log(f"{self._alias(client.sid)} deletion {how}")

    def _adopt(self, stored: StoredEvent) -> None:
        """A child session a task call created joins the clients (no actions of its own)."""
        child = child_of(stored) if self.w.features.tasks else None
        if child is not None and all(c.sid != child[0] for c in self.clients):
            sid, parent, location = child
            self.clients.append(_Client(sid, location, parent))
            self.clients[-1].created = True
            self.w.log(f"{self._alias(sid)} is a task of {self._alias(parent)}")

    async def _read(self, query: Any) -> Any:
        """A read of the checks, tried again while the store restarts after a fault."""
        for _ in range(5):
            try:
                return await self.rt.storage.read(query)
            except StorageError:
                await trio.sleep(0.1)
        return await self.rt.storage.read(query)

    async def _watch(self, subscription: Any) -> None:
        """Check each committed batch as it is published."""
        while True:
            item = await subscription.receive()
            if self.w.dead or not isinstance(item, StoredEvent):
                continue
            s = self.checker.sessions.get(item.aggregate_id)
            if (
                s is not None
                and item.seq < s.next_seq
                and item.seq in self.published.get(item.aggregate_id, {})
            ):
                continue  # already read back when this generation opened
            self.checker.feed([item])
            self.published.setdefault(item.aggregate_id, {})[item.seq] = item.id
            self._adopt(item)
            self.w.log(f"event {self._alias(item.aggregate_id)} {item.seq} {item.type}")

    async def _settle(self, rt: Any) -> None:
        """Faults stop; every session must reach idle (a pending permission request is
        visible, and its user then interrupts) within the liveness bound; then the end
        checks run over the whole store."""
        w = self.w
        w.stop_faults()
        w.block_output(False)
        w.log("faults stop")
        await self._resolve_deletions("reported failed")
        idle: set[str] = set()
        with trio.move_on_after(LIVENESS_BOUND) as bound:
            # Each round waits for the sessions not idle yet, with the children that
            # tasks created meanwhile.
            while waiting := [c for c in self._live() if c.sid not in idle]:
                for client in waiting:
                    await self._give_up_asks(rt, client)
                for client in waiting:
                    with trio.move_on_after(60):
                        await rt.sessions.wait_idle(client.sid)
                        idle.add(client.sid)
        live = self._live()
        self.checker.checks["liveness.idle_after_faults"] += len(live)
        if bound.cancelled_caught:
            busy = [self._alias(c.sid) for c in live if c.sid in rt.sessions.active()]
            self.checker.fail("liveness.idle_after_faults", f"not idle after faults: {busy}")
        w.log("settled")
        await self._final_checks(rt)

    async def _give_up_asks(self, rt: Any, client: _Client) -> None:
        """Pending questions are rejected; pending permission requests interrupted."""
        state = self.checker.sessions.get(client.sid)
        if state is None or not (state.asks or state.questions):
            return
        w, name = self.w, self._alias(client.sid)
        try:
            if state.questions:
                await give_up_questions(rt.tools, client.sid, lambda t: w.log(f"{name} {t}"))
            if not state.asks:
                return
            asks = [p for p in await rt.sessions.permissions(client.sid) if p.status == "pending"]
        except SessionNotFoundError:
            return
        if asks:
            w.log(f"{name} gives up on {len(asks)} asks: interrupt")
            await rt.sessions.interrupt(client.sid)

    def _live(self) -> list[_Client]:
        return [c for c in self.clients if c.created and not c.deleted]

    async def _final_checks(self, rt: Any) -> None:
        sessions = [(c.sid, c.acked) for c in self._live()]
        await check_the_store(rt.storage, self.checker, self.w, sessions)

    # -- clients ------------------------------------------------------------------------

    def _alias(self, sid: str) -> str:
        for index, client in enumerate(self.clients):
            if client.sid == sid:
                return f"s{index}"
        return sid

    def _clock(self, kind: str) -> None:
        w = self.w
        if kind == "jump":
            step = w.provider_rng.randint(60_000, 6 * 3_600_000)
        else:
            now = w.now_ms()
            step = 86_400_000 - now % 86_400_000 + w.provider_rng.randint(1, 60_000)
        w.offset_ms += step
        w.inject(f"clock.{'jump' if kind == 'jump' else 'rollover'}", f"+{step} ms")

    async def _act(self, client: _Client, action: Action) -> None:
        w, gen = self.w, self.w.generation
        name = f"{self._alias(client.sid)} {action.kind} {action.arg}".rstrip()
        try:
            outcome = await self._perform(client, action)
        except Exception as exc:  # every refusal is an answer the trace records
            if w.dead or w.generation != gen:
                return
            kind = type(exc).__name__
            self.errors[kind] = self.errors.get(kind, 0) + 1
            w.log(f"{name} -> {kind}")
            return
        if not w.dead and w.generation == gen:
            w.log(f"{name} -> {outcome}")

    async def _perform(self, client: _Client, action: Action) -> str:
        rt, w, sid = self.rt, self.w, client.sid
        gen = w.generation
        kind, arg = action.kind, action.arg
        if kind == "create":
            await rt.sessions.create(id=sid, location=Location(directory=client.location))
            if not w.dead and w.generation == gen:
                client.created = True
            return "created"
        if client.deleted and kind != "prompt":
            return "gone"
        if kind in ("prompt", "retry", "conflict"):
            return await self._prompt(client, kind, arg)
        if kind == "interrupt":
            await rt.sessions.interrupt(sid)
        elif kind == "resume":
            await rt.sessions.resume(sid, wait=False)
        elif kind == "agent":
            await rt.sessions.switch_agent(sid, arg)
        elif kind == "model":
            provider, model = arg.split("/")
            await rt.sessions.switch_model(sid, ModelRef(id=model, provider_id=provider))
        elif kind == "reply":
            # With tasks, a client answers its running tasks' requests too, as a watcher
            # of the session sees them.
            tasks = [c.sid for c in self.clients if c.parent == sid and not c.deleted]
            asks = []
            for asker in [sid, *tasks]:
                asks += [p for p in await rt.sessions.permissions(asker) if p.status == "pending"]
            if not asks or arg == "never":
                return f"{len(asks)} pending"
            ask = asks[self.rng.randrange(len(asks))]
            await rt.sessions.reply_permission(ask.session_id, ask.id, arg)  # type: ignore[arg-type]
        elif kind == "answer":
            return await answer_question(rt.tools, sid, arg, self.rng)
        elif kind == "delete":
            client.deleting = True
            await rt.sessions.delete(sid)
            if not w.dead and w.generation == gen:
                client.deleted = True
        elif kind == "compact":
            await rt.sessions.compact(sid)
        elif kind == "context":
            w.notes[client.location] = w.notes.get(client.location, 0) + 1
        return "ok"

    async def _prompt(self, client: _Client, kind: str, arg: str) -> str:
        rt, w = self.rt, self.w
        gen = w.generation
        if kind == "prompt":
            delivery = arg.split(":")[0]
            text = f"task {self.rng.randrange(10_000)}"
            mid = w.ids.new("msg") if arg.endswith(":id") else None
            if mid is not None:
                client.own_ids.append((mid, text, delivery))
        else:
            # A conflict reuses an id known to be admitted; one whose prompt was in flight
            # at a crash may never have been, and its reuse is then the first admission.
            known = [o for o in client.own_ids if kind == "retry" or o[0] in client.acked]
            if not known:
                return f"nothing to {kind}"
            mid, text, delivery = known[self.rng.randrange(len(known))]
            if kind == "conflict":
                text += " changed"
        prompt = Prompt(text=text)
        receipt = await rt.sessions.prompt(client.sid, prompt=prompt, id=mid, delivery=delivery)
        if w.dead or w.generation != gen:
            return "lost"
        if kind == "conflict":
            self.checker.fail(
                "admission.acknowledged_durable",
                f"{client.sid} conflicting reuse of {mid} accepted",
            )
        first = client.acked.setdefault(receipt.id, receipt.admitted_seq)
        if first != receipt.admitted_seq:
            self.checker.fail(
                "admission.acknowledged_durable",
                f"{client.sid} retry of {receipt.id} got seq {receipt.admitted_seq}, not {first}",
            )
        return f"admitted {receipt.admitted_seq}"

    # -- the result ---------------------------------------------------------------------

    def result(self) -> Result:
        w = self.w
        checks = {name: self.checker.checks.get(name, 0) for name in CHECKS}
        return Result(
            seed=w.seed, sessions=self.workload.sessions, faults=w.plan.describe(),
            trace=w.lines, injected=dict(sorted(w.injected.items())), checks=checks,
            violations=self.checker.violations, crashes=self.crashes,
            simulated_seconds=round(self.finished_at, 3), actions=len(self.workload.actions),
            errors=dict(sorted(self.errors.items())), compactions=self.checker.compactions,
        )  # fmt: skip
