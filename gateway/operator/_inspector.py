"""The ``/inspector`` page: one static HTML page (no CDN, charts drawn as inline SVG) polling
``/api/inspector/state`` and, for the selected session, ``/api/telemetry/spans``."""

from __future__ import annotations

from typing import Final

__all__ = ["INSPECTOR_HTML"]

INSPECTOR_HTML: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kittiwake inspector</title>
<style>
body{font:13px/1.4 ui-sans-serif,system-ui,sans-serif;margin:1em 1.5em;background:#f6f7f9;color:#1d2330}
h1{font-size:18px;margin:0 0 .3em}h2{font-size:14px;margin:0 0 .4em;color:#334}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.panel{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px 12px;overflow:auto}
.wide{grid-column:1 / span 2}
table{border-collapse:collapse;width:100%}td,th{padding:2px 6px;text-align:left;vertical-align:top}
th{color:#556;font-weight:600;border-bottom:1px solid #e3e6ec}
tr.sel{background:#eef4ff}tr.session{cursor:pointer}
.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;color:#fff}
.st-busy{background:#2563eb}.st-idle{background:#16a34a}.st-inactive{background:#8b93a1}
.st-failed,.st-crashed{background:#dc2626}.st-needs-resume,.st-restarting{background:#d97706}
.st-running{color:#15803d}.st-dead,.st-stopped,b.st-failed{color:#b91c1c;background:none}.st-passivated{color:#6b7280}
.meta{color:#667}.err{color:#b91c1c}
ul.tree{list-style:none;padding-left:1.2em;border-left:1px dotted #aab;margin:0}
.tot{display:flex;gap:18px;flex-wrap:wrap}.tot div b{display:block;font-size:16px}
svg text{font:11px ui-sans-serif,system-ui,sans-serif;fill:#334}
</style></head>
<body><h1>Kittiwake inspector</h1><div id="status" class="meta">loading…</div>
<div class="grid">
<div class="panel wide"><h2>Totals</h2><div id="totals" class="tot"></div></div>
<div class="panel wide"><h2>Sessions</h2><table id="sessions"></table></div>
<div class="panel wide"><h2>Timeline <span id="timeline-title" class="meta"></span></h2>
<div id="timeline" class="meta">select a session</div></div>
<div class="panel"><h2>Mailbox depths</h2><div id="chart-mailbox"></div></div>
<div class="panel"><h2>Storage commit latency (ms)</h2><div id="chart-commit"></div></div>
<div class="panel"><h2>Recent errors</h2><div id="errors"></div></div>
<div class="panel"><h2>Locations</h2><ul id="locations"></ul></div>
<div class="panel"><h2>Actors</h2><div id="tree"></div></div>
<div class="panel"><h2>Storage</h2><table id="storage"></table></div>
<div class="panel wide"><h2>Audit <span class="meta">admin actions and refused requests</span></h2><table id="audit"></table></div>
</div>
<script>
const esc = s => String(s ?? "").replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
const num = (v, d = 0) => v == null ? "-" : Number(v).toLocaleString("en-US", {maximumFractionDigits: d, minimumFractionDigits: d});
const ms = v => v == null ? "-" : (v >= 100 ? num(v, 0) : num(v, v >= 10 ? 1 : 2)) + " ms";
let selected = null;
const $ = id => document.getElementById(id);
function node(n) {
  const s = n.statistics || {};
  const bound = s.mailbox_bound === null ? "∞" : s.mailbox_bound;
  const kids = (n.children || []).map(node).join("");
  const label = s.label && s.label !== s.id ? ` (${esc(s.label)})` : "";
  const state = s.last_error ? "failed" : s.state;
  return `<li><b class="st-${esc(state)}">${esc(s.id)}</b>${label} <span class="meta">[${esc(s.kind)}] ${esc(s.state)}
    · mailbox ${esc(s.mailbox_depth)}/${esc(bound)} · restarts ${esc(s.restarts)}
    · ${s.current_activity ? esc(s.current_activity) : "waiting"}</span>
    ${s.last_error ? `<div class="err">last drain failed: ${esc(s.last_error)}</div>` : ""}
    ${s.last_death_cause ? `<div class="err">died: ${esc(s.last_death_cause)}</div>` : ""}
    ${kids ? `<ul class="tree">${kids}</ul>` : ""}</li>`;
}
function lineChart(series, lines, unit) {
  const W = 460, H = 120, P = 28, t = series.t || [];
  if (!t.length) return `<span class="meta">no samples yet</span>`;
  const t0 = t[0], t1 = Math.max(t[t.length - 1], t0 + 1);
  let top = 1;
  for (const [key] of lines) for (const v of series[key] || []) top = Math.max(top, v);
  const x = v => P + (v - t0) / (t1 - t0) * (W - P - 6), y = v => H - 16 - v / top * (H - 26);
  let out = `<svg width="${W}" height="${H}" role="img"><line x1="${P}" y1="${H-16}" x2="${W}" y2="${H-16}" stroke="#ccd"/>`;
  out += `<text x="2" y="12">${num(top, top < 10 ? 2 : 0)}${unit}</text><text x="2" y="${H-18}">0</text>`;
  out += `<text x="${P}" y="${H-3}">${Math.round(t1 - t0)} s ago</text><text x="${W-30}" y="${H-3}">now</text>`;
  lines.forEach(([key, color, label], i) => {
    const vs = series[key] || [];
    const pts = vs.map((v, j) => `${x(t[j]).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    out += `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${pts}"/>`;
    out += `<text x="${P + 8 + i * 110}" y="12" style="fill:${color}">${esc(label)} ${num(vs[vs.length-1], 2)}</text>`;
  });
  return out + "</svg>";
}
const COLORS = {"drain":"#94a3b8","provider.turn":"#2563eb","tool":"#16a34a","compaction":"#9333ea",
  "permission.wait":"#d97706","context.reconcile":"#0891b2","storage.batch":"#cbd5e1","admission":"#64748b"};
function waterfall(spans) {
  const drains = spans.filter(s => s.name === "drain").slice(-3);
  if (!drains.length) return `<span class="meta">no drains recorded for this session yet</span>`;
  const traces = new Set(drains.map(d => d.trace_id));
  const shown = spans.filter(s => traces.has(s.trace_id) && s.name !== "storage.batch");
  const t0 = Math.min(...shown.map(s => s.start_ns)), t1 = Math.max(...shown.map(s => s.end_ns), t0 + 1);
  const byId = Object.fromEntries(shown.map(s => [s.span_id, s]));
  const depth = s => { let d = 0; while (s.parent_id && byId[s.parent_id]) { s = byId[s.parent_id]; d++; } return d; };
  const W = 900, L = 220, R = 10, row = 18;
  const x = v => L + (v - t0) / (t1 - t0) * (W - L - R);
  let out = `<svg width="${W}" height="${shown.length * row + 24}" role="img">`;
  shown.forEach((s, i) => {
    const y = i * row + 4, w = Math.max(2, x(s.end_ns) - x(s.start_ns));
    const a = s.attributes || {}, label = s.name === "tool" ? `tool ${a["gen_ai.tool.name"] || ""}` :
      s.name === "provider.turn" ? `turn ${a["gen_ai.request.model"] || ""}` : s.name;
    const color = s.status === "error" ? "#dc2626" : (COLORS[s.name] || "#64748b");
    out += `<text x="${4 + depth(s) * 12}" y="${y + 12}">${esc(label)}</text>`;
    out += `<rect x="${x(s.start_ns).toFixed(1)}" y="${y + 2}" width="${w.toFixed(1)}" height="${row - 6}" rx="2" fill="${color}"><title>${esc(s.name)} ${ms(s.duration_ms)}</title></rect>`;
    out += `<text x="${Math.min(x(s.start_ns) + w + 4, W - 60).toFixed(1)}" y="${y + 12}">${ms(s.duration_ms)}</text>`;
  });
  out += `<text x="${L}" y="${shown.length * row + 20}">0</text><text x="${W - 80}" y="${shown.length * row + 20}">${ms((t1 - t0) / 1e6)}</text>`;
  return out + "</svg>";
}
async function timeline() {
  if (!selected) return;
  try {
    const r = await fetch(`api/telemetry/spans?sessionID=${encodeURIComponent(selected)}&since=1d`, {credentials: "same-origin"});
    const d = await r.json();
    $("timeline").innerHTML = r.ok ? waterfall(d.data || []) : `<span class="err">${esc(d.message)}</span>`;
    $("timeline-title").textContent = selected;
  } catch (e) { $("timeline").textContent = "unreachable: " + e; }
}
async function audit() {
  const r = await fetch("api/audit?limit=20", {credentials: "same-origin"});
  const d = await r.json();
  const rows = r.ok ? (d.data || []).map(e => `<tr><td class="meta">${new Date(e.time).toLocaleTimeString()}</td><td>${esc(e.user || "-")}</td><td>${esc(e.action)}</td><td class="num">${e.status}</td><td class="meta">${esc(e.address)}</td><td class="err">${esc(e.message)}</td></tr>`) : [`<tr><td class="meta">${esc(d.message)}</td></tr>`];
  $("audit").innerHTML = rows.join("") || `<tr><td class="meta">none</td></tr>`;
}
function pick(id) { selected = id; refresh(); }
async function refresh() {
  try {
    const r = await fetch("api/inspector/state", {credentials: "same-origin"});
    const d = await r.json();
    const t = d.totals || {};
    $("totals").innerHTML = [["sessions", num(t.sessions)], ["tokens in", num(t.tokens_in)],
      ["tokens out", num(t.tokens_out)], ["cached", num(t.tokens_cached)], ["cost", "$" + num(t.cost, 4)],
      ["spans written", num(d.telemetry ? d.telemetry.written : null)], ["spans dropped", num(d.telemetry ? d.telemetry.dropped : null)]]
      .map(([k, v]) => `<div><b>${v}</b><span class="meta">${k}</span></div>`).join("");
    const sessions = d.sessions || [];
    if (!selected && sessions.length) selected = sessions[0].id;
    $("sessions").innerHTML = `<tr><th>state</th><th>title</th><th>session</th><th class="num">in</th><th class="num">out</th><th class="num">cost $</th><th>doing / error</th></tr>` +
      sessions.map(s => `<tr class="session${s.id === selected ? " sel" : ""}" onclick="pick('${esc(s.id)}')">
      <td><span class="badge st-${esc(s.state)}">${esc(s.state)}</span></td><td>${esc(s.title)}</td>
      <td class="meta">${esc(s.id)}</td><td class="num">${num(s.tokens_in)}</td><td class="num">${num(s.tokens_out)}</td>
      <td class="num">${num(s.cost, 4)}</td><td>${s.error ? `<span class="err">${esc(s.error)}</span>` : esc(s.activity)}</td></tr>`).join("");
    $("locations").innerHTML = (d.locations || []).map(l => `<li>${esc(l)}</li>`).join("");
    $("tree").innerHTML = `<ul class="tree">${(d.tree || []).map(node).join("")}</ul>`;
    $("storage").innerHTML = Object.entries(d.storage || {}).map(([k, v]) =>
      `<tr><th>${esc(k.replaceAll("_", " "))}</th><td class="num">${esc(typeof v === "number" ? num(v, Number.isInteger(v) ? 0 : 2) : v)}</td></tr>`).join("");
    $("chart-mailbox").innerHTML = lineChart(d.series || {}, [["mailbox_total", "#2563eb", "sessions"], ["mailbox_max", "#9333ea", "deepest"], ["storage_queue", "#d97706", "storage"]], "");
    $("chart-commit").innerHTML = lineChart(d.series || {}, [["commit_ms", "#16a34a", "last commit"]], " ms");
    const errors = d.errors || [];
    const failed = sessions.filter(s => s.error);
    $("errors").innerHTML = !errors.length && !failed.length ? `<span class="meta">none</span>` :
      `<table>${errors.map(e => `<tr><td class="meta">${new Date(e.end_ns / 1e6).toLocaleTimeString()}</td><td>${esc(e.name)}</td><td class="err">${esc(e.message)}</td><td class="meta">${esc(e.session_id)}</td></tr>`).join("")}
      ${failed.map(s => `<tr><td class="meta">session</td><td>${esc(s.title)}</td><td class="err">${esc(s.error)}</td><td class="meta">${esc(s.id)}</td></tr>`).join("")}</table>`;
    await audit();
    $("status").textContent = `pid ${d.pid}, ${sessions.length} sessions, ${d.subscribers} subscribers, updated ${new Date().toLocaleTimeString()}`;
    await timeline();
  } catch (e) {
    $("status").textContent = "unreachable: " + e;
  }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
"""
