"""The ``/inspector`` page: a static HTML view polling ``/api/actors``."""

from __future__ import annotations

from typing import Final

__all__ = ["INSPECTOR_HTML"]

INSPECTOR_HTML: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kittiwake inspector</title>
<style>
body{font:14px/1.4 ui-monospace,monospace;margin:1.5em;background:#fafafa;color:#222}
ul{list-style:none;padding-left:1.4em;border-left:1px dotted #aaa}
.state-running{color:#070}.state-failed,.state-stopped{color:#a00}
.meta{color:#666}table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left}
</style></head>
<body><h1>Kittiwake actors</h1><div id="status" class="meta">loading…</div>
<div id="tree"></div><h2>Storage</h2><table id="storage"></table>
<script>
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
function stat(byId, id) { return byId[id] || {}; }
function node(n, byId) {
  const s = stat(byId, n.id || n.actor_id);
  const label = Object.entries(n).filter(([k, v]) => k !== "children" && typeof v !== "object")
    .map(([k, v]) => `${esc(k)}=${esc(v)}`).join(" ");
  const extra = Object.entries(s).filter(([k, v]) => typeof v !== "object")
    .map(([k, v]) => `${esc(k)}=${esc(v)}`).join(" ");
  const kids = (n.children || []).map(c => node(c, byId)).join("");
  return `<li><b class="state-${esc(n.state || s.state || "")}">${label}</b>
    <span class="meta">${extra}</span>${kids ? `<ul>${kids}</ul>` : ""}</li>`;
}
async function refresh() {
  try {
    const r = await fetch("api/actors", {credentials: "same-origin"});
    const d = await r.json();
    const byId = {};
    for (const a of d.actors || []) byId[a.id || a.actor_id] = a;
    document.getElementById("tree").innerHTML = `<ul>${(d.tree || []).map(n => node(n, byId)).join("")}</ul>`;
    document.getElementById("storage").innerHTML = Object.entries(d.storage || {})
      .map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join("");
    document.getElementById("status").textContent =
      `pid ${d.pid}, ${d.subscribers} subscribers, updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    document.getElementById("status").textContent = "unreachable: " + e;
  }
}
refresh(); setInterval(refresh, 1000);
</script></body></html>
"""
