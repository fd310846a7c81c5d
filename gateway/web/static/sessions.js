// The session list: newest first as `GET /api/session` pages them, grouped by directory,
// filtered by the search box (title, id or directory), each marked busy or idle.

import { api, enc } from "./api.js";
import { $, h, fill, when } from "./dom.js";

const PAGE = 100;

export class SessionList {
  constructor(app) {
    this.app = app;
    this.sessions = new Map();
    this.next = null;
    $("search").addEventListener("input", () => this.draw());
    $("more-sessions").addEventListener("click", () => this.load(this.next));
  }

  /** The first page again (or the page at *cursor*, added). Sessions put while the first
   * page was on its way stay: the page may have been read before they were created. */
  async load(cursor = null) {
    const before = new Map(this.sessions);
    const page = await api(`api/session?limit=${PAGE}` + (cursor ? `&cursor=${enc(cursor)}` : ""));
    if (!cursor) {
      const put = [...this.sessions.values()].filter((s) => before.get(s.id) !== s);
      this.sessions.clear();
      for (const s of put) this.sessions.set(s.id, s);
    }
    for (const s of page.data) this.sessions.set(s.id, { ...this.sessions.get(s.id), ...s });
    this.next = page.cursor?.next ?? null;
    this.draw();
  }

  put(info) {
    const old = this.sessions.get(info.id) ?? {};
    this.sessions.set(info.id, { ...old, ...info });
    this.draw();
  }

  draw() {
    const query = $("search").value.trim().toLowerCase();
    const shown = [...this.sessions.values()]
      .filter((s) => !query || [s.title, s.id, s.location?.directory].some((v) => (v ?? "").toLowerCase().includes(query)))
      .sort((a, b) => (b.time?.updated ?? 0) - (a.time?.updated ?? 0));
    const groups = new Map();
    for (const s of shown) {
      const dir = s.location?.directory ?? "";
      if (!groups.has(dir)) groups.set(dir, []);
      groups.get(dir).push(s);
    }
    fill($("sessions"), [...groups.entries()].map(([dir, list]) =>
      h("section", { class: "group" },
        h("h3", { class: "dir", title: dir, text: dir || "(no directory)" }),
        h("ul", {}, list.map((s) => this.item(s))))),
      shown.length ? null : h("p", { class: "empty", text: query ? "No session matches." : "No sessions yet." }));
    $("more-sessions").hidden = !this.next;
  }

  item(s) {
    const busy = this.app.busy.has(s.id);
    const current = this.app.view?.id === s.id;
    return h("li", { class: "session" + (current ? " current" : ""), dataset: { id: s.id } },
      h("a", { href: `#/session/${enc(s.id)}` },
        h("span", { class: "dot " + (busy ? "busy" : "idle"), title: busy ? "busy" : "idle", dataset: { state: busy ? "busy" : "idle" } }),
        h("span", { class: "title", text: s.title || s.id }),
        h("time", { text: when(s.time?.updated) })));
  }
}
