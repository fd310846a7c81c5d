"""``kittiwake stats``, ``trace`` and ``inspect``: the telemetry tables and the actor tree as
text; the runtime's telemetry options from ``telemetry`` in ``kittiwake.json``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from runtime.config import TelemetryConfig
from storage import TelemetryOptions

__all__ = ["render_summary", "render_trace", "render_tree", "telemetry_options"]

_MB: Final = 1024 * 1024
_PERCENTILES: Final = ("ttft", "turn", "tool", "commit")


def telemetry_options(config: TelemetryConfig | None) -> TelemetryOptions | None:
    """The runtime's telemetry options from the ``telemetry`` section: on unless
    ``enabled`` is false; retention, text and OTLP export as configured."""
    if config is None:
        return TelemetryOptions()
    if config.enabled is False:
        return None
    defaults = TelemetryOptions()
    otlp = config.otlp
    return TelemetryOptions(
        retention_days=config.retention_days or defaults.retention_days,
        max_bytes=config.max_mb * _MB if config.max_mb else defaults.max_bytes,
        record_text=bool(config.record_text),
        sample=config.sample if config.sample is not None else defaults.sample,
        otlp_endpoint=otlp.endpoint if otlp is not None else None,
        otlp_headers=(otlp.headers or {}) if otlp is not None else {},
    )


def _figure(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 1 else f"{value:.1f}"
    return str(value)


def render_summary(rows: Sequence[dict[str, Any]], by: str, *, sample: float | None = None) -> str:
    """The summary table (one row per model, session or day) as aligned text; with
    *sample* below 1, a last line says the percentiles come from that share of traces."""
    header = [by, "turns", "tokens in", "out", "cached", "cost $", "errors"]
    header += [f"{name} p50/p95/p99 ms" for name in _PERCENTILES]
    table = [header]
    for row in rows:
        line = [str(row["key"] if row["key"] is not None else "-")]
        line += [_figure(row[k]) for k in ("turns", "tokens_in", "tokens_out", "tokens_cached")]
        line += [f"{row['cost']:.4f}", str(row["errors"])]
        for name in _PERCENTILES:
            line.append("/".join(_figure(row[f"{name}_{q}_ms"]) for q in ("p50", "p95", "p99")))
        table.append(line)
    if len(table) == 1:
        return "nothing recorded in this period"
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    text = "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )
    if sample is not None and sample < 1:
        text += (
            f"\nturns, tokens, cost and errors: every turn (events); percentiles: the"
            f" {sample:.0%} of traces sampled"
        )
    return text


def _detail(span: dict[str, Any]) -> str:
    a = span["attributes"]
    name = span["name"]
    parts: list[str] = []
    if name == "provider.turn":
        parts.append(f"{a.get('gen_ai.provider.name')}/{a.get('gen_ai.request.model')}")
        if span.get("ttft_ms") is not None:
            parts.append(f"ttft {span['ttft_ms']:.1f} ms")
        parts.append(f"in {a.get('gen_ai.usage.input_tokens', 0)}")
        parts.append(f"out {a.get('gen_ai.usage.output_tokens', 0)}")
        parts.append(f"cached {a.get('kittiwake.tokens.cached', 0)}")
        parts.append(f"${a.get('kittiwake.cost', 0.0):.4f}")
        parts.append(f"finish {','.join(a.get('gen_ai.response.finish_reasons', []))}")
        if a.get("kittiwake.retries"):
            parts.append(f"retries {a['kittiwake.retries']}")
    elif name == "tool":
        parts.append(f"{a.get('gen_ai.tool.name')} {a.get('kittiwake.tool.outcome', '')}")
        if "kittiwake.tool.bytes" in a:
            parts.append(f"{a['kittiwake.tool.bytes']} bytes")
    elif name == "storage.batch":
        parts.append(f"ops {a.get('kittiwake.storage.operations')}")
        parts.append(f"events {a.get('kittiwake.storage.events')}")
        parts.append(f"fsync {a.get('kittiwake.storage.fsync_ms', 0):.2f} ms")
    elif name == "drain" and a.get("kittiwake.drain.mode"):
        parts.append(str(a["kittiwake.drain.mode"]))
    if a.get("kittiwake.outcome"):
        parts.append(str(a["kittiwake.outcome"]))
    if span["status"] == "error":
        parts.append(f"ERROR {span.get('status_message') or ''}".rstrip())
    return "  ".join(parts)


def render_trace(spans: Sequence[dict[str, Any]], *, drains: int) -> str:
    """The span trees of the last *drains* drains among *spans* (one session's), each span
    with its duration, indented under its parent."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for s in spans:
        children.setdefault(s["parent_id"], []).append(s)
    roots = [s for s in spans if s["name"] == "drain"][-drains:]
    if not roots:
        return "no drains recorded for this session"
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        detail = _detail(node)
        lines.append(
            f"{'  ' * depth}{node['name']}  {node['duration_ms']:.1f} ms"
            + (f"  {detail}" if detail else "")
        )
        for child in sorted(children.get(node["span_id"], []), key=lambda c: c["start_ns"]):
            walk(child, depth + 1)

    for root in roots:
        when = datetime.fromtimestamp(root["start_ns"] / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"# {when} UTC  trace {root['trace_id']}")
        walk(root, 0)
    return "\n".join(lines)


def render_tree(snapshot: dict[str, Any]) -> str:
    """The actor tree as indented text: state, mailbox depth, restarts, current activity."""
    lines: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        st = node.get("statistics", {})
        bound = st.get("mailbox_bound")
        mailbox = f"{st.get('mailbox_depth')}/{bound if bound is not None else 'inf'}"
        activity = st.get("current_activity") or "-"
        lines.append(
            f"{'  ' * depth}{st.get('id')} [{st.get('kind')}] {st.get('state')}"
            f"  mailbox={mailbox} restarts={st.get('restarts')} activity={activity}"
            + (f" last_error={st['last_error']!r}" if st.get("last_error") else "")
        )
        for child in node.get("children", []):
            walk(child, depth + 1)

    for root in snapshot.get("tree", []):
        walk(root, 0)
    storage = snapshot.get("storage", {})
    if storage:
        lines.append("storage: " + " ".join(f"{k}={v}" for k, v in storage.items()))
    return "\n".join(lines)
