// The open session: its timeline (a window of its newest messages, older pages fetched on
// scroll), kept current by the live connection in seq order, its permission and question
// requests answered inline, and the prompt box.
//
// Sequencing: the newest page of messages comes with a cursor `desc:<seq>` naming the seq of
// its oldest message's creating event; every event after that seq is read from the history
// (`GET /api/session/{id}/history?after=`) and applied over the snapshot (applying an event
// twice changes nothing, model.js). From then on `lastSeq` is the last event applied: a live
// event with the next seq is applied, an older one is dropped, and a newer one (a gap: the
// stream dropped frames, or the connection was made again) is held while the history fills
// the gap. So the timeline never shows an event twice nor skips one.

import { api, enc, cursorSeq, ApiError } from "./api.js";
import { $, h, fill, when } from "./dom.js";
import { Timeline } from "./model.js";
import { renderMessage } from "./render.js";

export const PAGE = 50; // messages per page of the timeline
const HISTORY_PAGE = 1000; // events per history request

export class SessionView {
  constructor(info, app) {
    this.id = info.id;
    this.info = info;
    this.app = app;
    this.model = new Timeline();
    this.lastSeq = 0;
    this.ready = false;
    this.catching = null;
    this.held = [];
    this.older = null; // cursor of the next older page, null when the oldest is shown
    this.loadingOlder = false;
    this.nodes = new Map();
    this.closed = false;
    this.frame = 0;
  }

  path(rest = "") {
    return `api/session/${enc(this.id)}${rest}`;
  }

  /** Fetch the newest page, catch up from its seq, draw; resolves once drawn. */
  async open() {
    fill($("messages"));
    fill($("queued"));
    fill($("requests"));
    this.drawHead();
    const page = await api(this.path(`/message?limit=${PAGE}`));
    if (this.closed) return;
    const newest = page.data.slice().reverse();
    this.model.prepend(newest);
    this.older = page.cursor?.next ?? null;
    this.lastSeq = this.older ? cursorSeq(this.older) ?? 0 : 0;
    this.drawAll();
    this.scrollToEnd();
    this.ready = true;
    await this.catchUp();
    await this.loadRequests();
    this.observeTop();
  }

  close() {
    this.closed = true;
    this.observer?.disconnect();
  }

  /** A frame of the live connection for this session. */
  onFrame(frame) {
    if (frame.seq == null) {
      if (frame.type === "session.updated") {
        this.info = { ...this.info, ...(frame.properties?.info ?? {}) };
        this.drawHead();
      } else if (frame.type?.includes(".delta") || frame.type === "session.next.retried") {
        this.model.delta(frame.type, frame.properties ?? {});
        this.schedule();
      }
      return;
    }
    this.accept({ seq: frame.seq, type: frame.type, data: frame.properties ?? {} });
  }

  accept(event) {
    if (!this.ready || this.catching) {
      this.held.push(event);
      return;
    }
    if (event.seq <= this.lastSeq) return;
    if (event.seq > this.lastSeq + 1) {
      this.held.push(event);
      this.catchUp();
      return;
    }
    this.applyEvent(event);
  }

  applyEvent(event) {
    this.lastSeq = event.seq;
    this.model.apply(event.type, event.data);
    if (event.type.startsWith("permission.") || event.type.startsWith("question.")) this.loadRequests();
    if (event.type === "session.updated" && event.data?.info) this.info = { ...this.info, ...event.data.info };
    if (event.type === "session.next.step.ended") this.refreshInfo();
    this.schedule();
  }

  /** The session's totals (tokens, cost) again, shortly after a step ended. */
  refreshInfo() {
    clearTimeout(this.infoTimer);
    this.infoTimer = setTimeout(async () => {
      try {
        this.info = (await api(this.path())).data;
        this.drawHead();
      } catch (e) {
        this.app.showError(e);
      }
    }, 200);
  }

  /** Read the history after lastSeq until none is left, then the held live events. */
  catchUp() {
    if (!this.catching) {
      this.catching = (async () => {
        try {
          for (;;) {
            const page = await api(this.path(`/history?after=${this.lastSeq}&limit=${HISTORY_PAGE}`));
            if (this.closed) return;
            for (const e of page.data) {
              if (e.durable.seq === this.lastSeq + 1) this.applyEvent({ seq: e.durable.seq, type: e.type, data: e.data ?? {} });
            }
            if (!page.hasMore) break;
          }
        } finally {
          this.catching = null;
        }
        const held = this.held.sort((a, b) => a.seq - b.seq);
        this.held = [];
        for (const e of held) this.accept(e);
      })();
    }
    return this.catching;
  }

  /** After the live connection is made again: the history after lastSeq. */
  reconnected() {
    if (!this.ready) return;
    this.catchUp().then(() => this.loadRequests()).catch((e) => this.app.showError(e));
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    if (this.closed) return;
    if (this.model.reload) {
      this.model.reload = false;
      this.app.reopen(this.id);
      return;
    }
    const stick = this.atEnd();
    const container = $("messages");
    const order = this.model.order;
    for (const id of this.model.changed) {
      const m = this.model.messages.get(id);
      if (!m) continue;
      const el = renderMessage(m, this.actions());
      const old = this.nodes.get(id);
      if (old) {
        keepOpen(old, el);
        old.replaceWith(el);
      } else {
        const index = order.indexOf(id);
        const next = order.slice(index + 1).map((n) => this.nodes.get(n)).find(Boolean);
        container.insertBefore(el, next ?? null);
      }
      this.nodes.set(id, el);
    }
    this.model.changed.clear();
    this.drawQueued();
    this.drawHead();
    if (stick) this.scrollToEnd();
  }

  drawAll() {
    const container = $("messages");
    const els = this.model.order.map((id) => {
      const el = renderMessage(this.model.messages.get(id), this.actions());
      this.nodes.set(id, el);
      return el;
    });
    container.replaceChildren(...els);
    this.model.changed.clear();
    this.drawQueued();
  }

  drawQueued() {
    fill($("queued"), [...this.model.queued.entries()].map(([id, q]) =>
      h("article", { class: "msg user queued", dataset: { id } },
        h("div", { class: "meta" }, h("span", { text: `You · ${q.delivery === "queue" ? "queued" : "waiting"}` })),
        h("div", { class: "text", text: q.text }))));
  }

  drawHead() {
    const i = this.info;
    const notes = this.model.info;
    const busy = this.app.busy.has(this.id);
    fill($("session-head"),
      h("h2", { text: i.title || i.id }),
      h("div", { class: "meta" },
        h("span", { class: "dir", text: i.location?.directory ?? "" }),
        h("span", { class: "badge " + (busy ? "busy" : "idle"), text: busy ? "busy" : "idle" }),
        h("span", { text: `${(i.tokens?.input ?? 0) + (i.tokens?.output ?? 0)} tokens · $${Number(i.cost ?? 0).toFixed(4)}` })),
      (notes.lastError ?? i.lastError) && h("div", { class: "step-error", role: "alert", text: "Run failed: " + ((notes.lastError ?? i.lastError).message ?? "") }),
      (notes.needsResume || i.needsResume) && h("div", { class: "note" }, "A restart cut this session's work short. ",
        h("button", { type: "button", text: "Resume", onclick: () => this.act(() => api(this.path("/resume"), { method: "POST" })) })),
      notes.retry && h("div", { class: "note", text: `Retrying (attempt ${notes.retry.attempt}): ${notes.retry.error?.message ?? ""}` }),
      i.revert && h("div", { class: "note revert" }, "Messages after an undo are hidden. ",
        h("button", { type: "button", text: "Redo", onclick: () => this.act(() => api(this.path("/revert/clear"), { method: "POST" })) }), " ",
        h("button", { type: "button", text: "Keep undone", onclick: () => this.act(() => api(this.path("/revert/commit"), { method: "POST" })) })));
    $("abort").disabled = !busy;
    $("send").textContent = busy ? "Steer" : "Send";
  }

  actions() {
    return { undo: (messageID) => this.act(async () => {
      await api(this.path("/revert/stage"), { method: "POST", body: { messageID } });
      this.app.reopen(this.id);
    }) };
  }

  async act(fn) {
    try {
      await fn();
      $("prompt-error").textContent = "";
    } catch (e) {
      $("prompt-error").textContent = e instanceof ApiError ? `${e.tag}: ${e.message}` : String(e);
    }
  }

  atEnd() {
    const t = $("timeline");
    return t.scrollHeight - t.scrollTop - t.clientHeight < 40;
  }

  scrollToEnd() {
    const t = $("timeline");
    t.scrollTop = t.scrollHeight;
  }

  observeTop() {
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.loadOlder();
    }, { root: $("timeline"), rootMargin: "400px 0px 0px 0px" });
    this.observer.observe($("older"));
    this.drawOlder();
  }

  drawOlder() {
    fill($("older"), this.older ? (this.loadingOlder ? "loading older messages…" : "") : "Start of the session");
  }

  /** Fetch the page before the oldest shown and put it above, keeping the view still. */
  async loadOlder() {
    if (!this.older || this.loadingOlder || this.closed) return;
    this.loadingOlder = true;
    this.drawOlder();
    try {
      const page = await api(this.path(`/message?limit=${PAGE}&cursor=${enc(this.older)}`));
      if (this.closed) return;
      const t = $("timeline");
      const before = t.scrollHeight;
      const fresh = this.model.prepend(page.data.slice().reverse());
      const els = fresh.map((m) => {
        const el = renderMessage(m, this.actions());
        this.nodes.set(m.id, el);
        return el;
      });
      $("messages").prepend(...els);
      t.scrollTop += t.scrollHeight - before;
      this.older = page.cursor?.next ?? null;
    } finally {
      this.loadingOlder = false;
      this.drawOlder();
    }
    // still in view (a short page): the observer does not fire again by itself
    const t = $("timeline");
    if (this.older && t.scrollTop < 400) this.loadOlder();
  }

  /** Draw the pending requests; of overlapping calls, only the latest one's answer. */
  async loadRequests() {
    const call = (this.requestCalls = (this.requestCalls ?? 0) + 1);
    const [permissions, questions] = await Promise.all([
      api(this.path("/permission")),
      api(this.path("/question")),
    ]);
    if (this.closed || call !== this.requestCalls) return;
    fill($("requests"),
      permissions.data.map((p) => this.permission(p)),
      questions.data.map((q) => this.question(q)));
    if (this.atEnd()) this.scrollToEnd();
  }

  permission(p) {
    const reply = (value) => this.act(async () => {
      await api(this.path(`/permission/${enc(p.id)}/reply`), { method: "POST", body: { reply: value } });
      await this.loadRequests();
    });
    return h("div", { class: "request permission", dataset: { id: p.id } },
      h("div", {}, h("b", { text: "Permission: " }), h("span", { text: `${p.metadata?.tool ?? p.action} wants ${p.action}` })),
      h("ul", {}, (p.resources ?? []).map((r) => h("li", {}, h("code", { text: r })))),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "allow", text: "Allow once", onclick: () => reply("once") }),
        h("button", { type: "button", class: "always", text: "Always allow", onclick: () => reply("always") }),
        h("button", { type: "button", class: "danger reject", text: "Reject", onclick: () => reply("reject") })));
  }

  question(q) {
    const form = h("form", { class: "request question", dataset: { id: q.id } });
    const fields = q.questions.map((item, i) => {
      const multiple = item.multiple === true;
      const boxes = item.options.map((o) =>
        h("label", { class: "option" },
          h("input", { type: multiple ? "checkbox" : "radio", name: `q${i}`, value: o.label }),
          h("span", { text: o.label }), o.description && h("small", { text: " " + o.description })));
      const custom = item.custom === false ? null : h("input", { type: "text", name: `c${i}`, placeholder: "or type an answer" });
      return { fieldset: h("fieldset", {}, h("legend", { text: item.header || `Question ${i + 1}` }), h("p", { text: item.question }), boxes, custom), custom, i };
    });
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const answers = fields.map(({ custom, i }) => {
        const picked = [...form.querySelectorAll(`input[name="q${i}"]:checked`)].map((b) => b.value);
        if (custom && custom.value.trim()) picked.push(custom.value.trim());
        return picked;
      });
      this.act(async () => {
        await api(this.path(`/question/${enc(q.id)}/reply`), { method: "POST", body: { answers } });
        await this.loadRequests();
      });
    });
    const reject = () => this.act(async () => {
      await api(this.path(`/question/${enc(q.id)}/reject`), { method: "POST" });
      await this.loadRequests();
    });
    return fill(form, h("b", { text: "Question" }), fields.map((f) => f.fieldset),
      h("div", { class: "actions" }, h("button", { type: "submit", text: "Answer" }), h("button", { type: "button", class: "danger", text: "Dismiss", onclick: reject })));
  }

  /** Send the prompt box's text with *delivery* (`steer` or `queue`). */
  async prompt(text, delivery) {
    await api(this.path("/prompt"), { method: "POST", body: { prompt: { text }, delivery } });
  }

  async abort() {
    await api(this.path("/interrupt"), { method: "POST" });
  }
}

/** Keep the open/closed state of the collapsible parts of a message drawn again. */
function keepOpen(old, el) {
  const open = new Map([...old.querySelectorAll("details[data-key]")].map((d) => [d.dataset.key, d.open]));
  for (const d of el.querySelectorAll("details[data-key]")) {
    if (open.has(d.dataset.key)) d.open = open.get(d.dataset.key);
  }
}

export { when };
