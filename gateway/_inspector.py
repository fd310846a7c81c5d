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
function node(n) {
  const s = n.statistics || {};
  const bound = s.mailbox_bound === null ? "inf" : s.mailbox_bound;
  const kids = (n.children || []).map(node).join("");
  return `<li><b class="state-${esc(s.state)}">${esc(s.id)}</b> [${esc(s.kind)}] ${esc(s.state)}
    <span class="meta">mailbox ${esc(s.mailbox_depth)}/${esc(bound)} peak ${esc(s.mailbox_peak)}
    restarts ${esc(s.restarts)} in ${esc(s.messages_in)} out ${esc(s.messages_out)}
    ${s.current_activity ? "doing " + esc(s.current_activity) : "idle"}
    ${s.last_death_cause ? "last death: " + esc(s.last_death_cause) : ""}
    ${s.last_error ? "last error: " + esc(s.last_error) : ""}</span>
    ${kids ? `<ul>${kids}</ul>` : ""}</li>`;
}
async function refresh() {
  try {
    const r = await fetch("api/actors", {credentials: "same-origin"});
    const d = await r.json();
    document.getElementById("tree").innerHTML = `<ul>${(d.tree || []).map(node).join("")}</ul>`;
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
