"""Telemetry over HTTP: span and summary queries, the inspector's state, request spans.

``/api/telemetry/spans`` and ``/api/telemetry/summary`` answer from the runtime's telemetry
tables (DuckDB SQL, in a worker thread); ``/api/inspector/state`` gathers what the
inspector page draws: every session (not only active ones) with a truthful state, the
actor tree, storage figures rounded, token and cost totals, recent errors and the sampled
series of mailbox depths and commit latency; ``/api/actors`` the actor tree and storage
statistics; ``/inspector`` the page. ``operator_routes`` installs them all.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec
import trio
from quart import Response, request
from quart_trio import QuartTrio

from actors import Runtime, SessionActor
from gateway.http import HTML, Answer, Gateway, GatewayError, Room, RouteTable
from gateway.operator._inspector import INSPECTOR_HTML
from runtime import SessionInfo
from storage import Statistics, SummaryKey, Usage, UsageRow

if TYPE_CHECKING:
    from storage import TelemetryStore

__all__ = [
    "DEFAULT_SAMPLES",
    "Samples",
    "actors_snapshot",
    "inspector_state",
    "merge_summary",
    "operator_routes",
    "parse_since",
    "sample_forever",
    "telemetry_routes",
]

DEFAULT_SAMPLES: Final = 300
"""Samples kept for the inspector's charts (one a second: five minutes)."""
SESSIONS_SHOWN: Final = 200
"""The most recently updated sessions the inspector lists."""
SPANS_LIMIT: Final = 5000
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_SINCE: Final = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_KEYS: Final[tuple[SummaryKey, ...]] = ("model", "session", "day")


def parse_since(raw: str | None, now_ns: int | None = None) -> int | None:
    """*raw* (``7d``, ``12h``, ``30m``, ``45s``, ``2w``, or epoch milliseconds) as epoch
    nanoseconds; None for none. Raises GatewayError (InvalidRequestError) otherwise."""
    if raw is None or raw == "":
        return None
    now_ns = time.time_ns() if now_ns is None else now_ns
    found = _SINCE.match(raw)
    if found is not None:
        return now_ns - int(float(found[1]) * _UNITS[found[2]] * 1e9)
    if raw.isdigit():
        return int(raw) * 1_000_000
    raise GatewayError(
        "InvalidRequestError", f"since must be like 7d, 12h, 30m or epoch milliseconds: {raw!r}"
    )


class Samples:
    """The inspector's recent series: one sample a second of the session mailboxes (their
    total and deepest), the storage queue and the latest commit's latency."""

    def __init__(self, size: int = DEFAULT_SAMPLES) -> None:
        self.rows: deque[tuple[float, int, int, int, float]] = deque(maxlen=size)

    def take(self, rt: Runtime, commit_ms: float) -> None:
        depths = [s.mailbox_depth for s in rt.directory.statistics() if s.kind == "session"]
        storage = rt.storage.statistics().mailbox_depth
        row = (time.time(), sum(depths), max(depths, default=0), storage, round(commit_ms, 3))
        self.rows.append(row)

    def series(self) -> dict[str, list[Any]]:
        names = ("t", "mailbox_total", "mailbox_max", "storage_queue", "commit_ms")
        return {name: [row[i] for row in self.rows] for i, name in enumerate(names)}


async def sample_forever(
    rt: Runtime, samples: Samples, stop: trio.Event, every: float = 1.0
) -> None:
    """Take a sample every *every* seconds until *stop* is set or cancelled. A failed
    storage read records the commit figure as 0 rather than stopping the series."""
    while not stop.is_set():
        try:
            commit_ms = (await rt.storage.read(Statistics())).last_commit_ms
        except Exception:  # noqa: BLE001 - a restarting store; the series goes on
            commit_ms = 0.0
        samples.take(rt, commit_ms)
        with trio.move_on_after(every):
            await stop.wait()


def _store(rt: Runtime) -> TelemetryStore:
    if rt.telemetry is None:
        raise GatewayError(
            "ServiceUnavailableError",
            "Telemetry is off: set telemetry.enabled in kittiwake.json (on by default for serve)",
            service="telemetry",
        )
    return rt.telemetry


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def session_state(info: SessionInfo, actor: SessionActor | None) -> tuple[str, str]:
    """A session's state for people, and what it is doing: ``failed`` (its latest run
    failed), ``needs-resume``, ``busy`` (a drain runs), ``idle`` (active, nothing to do),
    ``inactive`` (no actor: passivated or never woken), ``restarting`` or ``crashed`` (its
    actor failed)."""
    activity = actor.statistics().current_activity if actor is not None else ""
    if actor is not None and actor.state in ("restarting", "dead"):
        return ("crashed" if actor.state == "dead" else "restarting"), activity
    if actor is not None and not actor.lane.idle:
        return "busy", activity or "draining"
    if not isinstance(info.last_error, msgspec.UnsetType):
        return "failed", ""
    if info.needs_resume is True:
        return "needs-resume", ""
    return ("idle" if actor is not None else "inactive"), ""


async def inspector_state(rt: Runtime, samples: Samples) -> dict[str, Any]:
    """What the inspector page draws (see the module docstring)."""
    page = await rt.sessions.list(limit=SESSIONS_SHOWN)
    actors = {a.session_id: a for a in rt.execution.active_sessions()}
    sessions = []
    totals = {"sessions": 0, "tokens_in": 0, "tokens_out": 0, "tokens_cached": 0, "cost": 0.0}
    for info in cast(list[SessionInfo], page.data):
        actor = actors.get(info.id)
        state, activity = session_state(info, actor)
        error = None if isinstance(info.last_error, msgspec.UnsetType) else info.last_error
        tokens = info.tokens
        sessions.append({
            "id": info.id, "title": info.title, "state": state, "activity": activity,
            "error": None if error is None else f"{error.tag}: {error.message}",
            "directory": info.location.directory, "updated": info.time.updated,
            "tokens_in": tokens.input, "tokens_out": tokens.output,
            "tokens_cached": tokens.cache.read, "cost": round(info.cost, 4),
            "mailbox": actor.mailbox.depth if actor is not None else 0,
        })  # fmt: skip
        totals["sessions"] += 1
        totals["tokens_in"] += tokens.input
        totals["tokens_out"] += tokens.output
        totals["tokens_cached"] += tokens.cache.read
        totals["cost"] += info.cost
    totals["cost"] = round(float(totals["cost"]), 4)
    storage = msgspec.to_builtins(await rt.storage.read(Statistics()))
    errors: list[dict[str, Any]] = []
    telemetry: dict[str, Any] | None = None
    if rt.telemetry is not None:
        store = rt.telemetry
        telemetry = store.statistics()
        errors = await trio.to_thread.run_sync(partial(store.errors, limit=20))
    return {
        "pid": os.getpid(),
        "sessions": sessions,
        "locations": sorted({s["directory"] for s in sessions}),
        "tree": msgspec.to_builtins(rt.directory.tree()),
        "storage": _rounded(storage),
        "totals": totals,
        "errors": errors,
        "series": samples.series(),
        "telemetry": telemetry,
        "subscribers": rt.hub.subscriber_count(),
    }


def telemetry_routes(table: RouteTable, rt: Runtime, samples: Samples) -> None:
    """Declare the telemetry query routes and the inspector's state on *table*."""

    @table.get(
        "/api/telemetry/spans", "kittiwake.telemetry.spans",
        "Stored spans of a session's traces, of one trace, or since a time",
        answer=Answer(type=list[dict[str, Any]], envelope="data"),
        query=("sessionID", "traceID", "since", "limit"),
        errors=("InvalidRequestError", "ServiceUnavailableError"),
    )  # fmt: skip
    async def spans() -> Response:
        store = _store(rt)
        args = request.args
        limit = _limit(args.get("limit"))
        found = await trio.to_thread.run_sync(
            partial(
                store.spans, session_id=args.get("sessionID"), trace_id=args.get("traceID"),
                since_ns=parse_since(args.get("since")), limit=limit,
            )
        )  # fmt: skip
        return _json({"data": found})

    @table.get(
        "/api/telemetry/summary", "kittiwake.telemetry.summary",
        "Turns, tokens, cost, errors and latency percentiles per model, session or day",
        answer=Answer(type=list[dict[str, Any]], envelope="data"), query=("by", "since"),
        errors=("InvalidRequestError", "ServiceUnavailableError"),
    )  # fmt: skip
    async def summary() -> Response:
        store = _store(rt)
        by = request.args.get("by", "model")
        if by not in _KEYS:
            raise GatewayError("InvalidRequestError", f"by must be one of {', '.join(_KEYS)}")
        since = parse_since(request.args.get("since"))
        key = cast(SummaryKey, by)
        usage = await rt.storage.read(
            Usage(by=key, since_ms=None if since is None else since // 1_000_000)
        )
        latency = await trio.to_thread.run_sync(partial(store.summary, key, since_ns=since))
        body = {
            "data": merge_summary(usage, latency),
            "sample": store.options.sample,
            "sampled": list(SAMPLED_FIGURES),
        }
        return _json(body)

    @table.get(
        "/api/inspector/state", "kittiwake.inspector.state",
        "Sessions, actors, storage, totals, errors and recent series for the inspector",
        answer=Answer(type=dict[str, Any]),
    )  # fmt: skip
    async def state() -> Response:
        return _json(await inspector_state(rt, samples))


SAMPLED_FIGURES: Final = tuple(
    f"{name}_{q}_ms" for name in ("ttft", "turn", "tool", "commit") for q in ("p50", "p95", "p99")
)
"""Summary figures computed from the recorded spans (under trace sampling, the sampled
traces'); the others (turns, tokens, cost, errors) come from the durable events, exact."""


def merge_summary(
    usage: Sequence[UsageRow], latency: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One summary row per key of either side: the exact figures of *usage* (the event
    store's ``Usage``), the latency percentiles of *latency* (``TelemetryStore.summary``);
    a side without the key contributes zeros or None."""
    spans = {row["key"]: row for row in latency}
    exact = {row.key: row for row in usage}
    keys = sorted(spans.keys() | exact.keys(), key=lambda k: (k is None, k or ""))
    rows = []
    for key in keys:
        found = exact.get(key)
        row: dict[str, Any] = {
            "key": key, "turns": 0, "tokens_in": 0, "tokens_out": 0, "tokens_cached": 0,
            "cost": 0.0, "errors": 0,
        }  # fmt: skip
        if found is not None:
            row.update(msgspec.structs.asdict(found))
        timed = spans.get(key, {})
        row.update({name: timed.get(name) for name in SAMPLED_FIGURES})
        rows.append(row)
    return rows


def _limit(raw: str | None) -> int:
    if raw is None:
        return SPANS_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= SPANS_LIMIT:
        raise GatewayError("InvalidRequestError", f"limit must be between 1 and {SPANS_LIMIT}")
    return int(raw)


def _json(body: Any) -> Response:
    return Response(msgspec.json.encode(body), content_type="application/json")


async def actors_snapshot(rt: Runtime) -> dict[str, Any]:
    """The actor tree, per-actor statistics and storage statistics, as JSON-ready data."""
    storage = await rt.storage.read(Statistics())
    return {
        "tree": msgspec.to_builtins(rt.directory.tree()),
        "actors": msgspec.to_builtins(rt.directory.statistics()),
        "storage": {
            k: round(v, 2) if isinstance(v, float) else v
            for k, v in msgspec.to_builtins(storage).items()
        },
        "subscribers": rt.hub.subscriber_count(),
        "pid": os.getpid(),
    }


def operator_routes(gw: Gateway) -> Room:
    """The operator's room: ``/api/actors``, ``/inspector`` and the telemetry routes, and
    the inspector's sampling while served."""
    samples = Samples()
    gw.background.append(partial(sample_forever, gw.rt, samples))

    def install(table: RouteTable, app: QuartTrio) -> None:
        @table.get(
            "/api/actors", "kittiwake.actors", "Actor tree and storage statistics",
            answer=Answer(type=dict[str, Any]),
        )  # fmt: skip
        async def actors() -> Response:
            return _json(await actors_snapshot(gw.rt))

        @table.get("/inspector", "kittiwake.inspector", "The inspector page", answer=HTML)
        async def inspector() -> Response:
            return Response(INSPECTOR_HTML, content_type="text/html; charset=utf-8")

        telemetry_routes(table, gw.rt, samples)

    return install
