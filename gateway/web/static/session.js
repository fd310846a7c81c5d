// The open session: its timeline, kept current by the live connection in seq order, its
// permission and question requests answered inline, and the prompt box.
//
// Long sessions: the newest page of messages is fetched when the session opens; older pages
// are fetched as the reader scrolls up (the messages route's `desc:` cursor). The DOM holds a
// window of at most WINDOW messages of those held: scrolling up or down moves the window (and
// fetches the page before the oldest held when it reaches it), so a session of any length
// opens on one page and scrolls through a bounded DOM. Live changes to messages outside the
// window change the data only; new messages are drawn when the window is at the newest end.
//
// Sequencing: the newest page of messages comes with a cursor `desc:<seq>` naming the seq of
// its oldest message's creating event; every event after that seq is read from the history
// (`GET /api/session/{id}/history?after=`) and applied over the snapshot (applying an event
// twice changes nothing, model.js). From then on `lastSeq` is the last event applied: a live
// event with the next seq is applied, an older one is dropped, and a newer one (a gap: the
// stream dropped frames, or the connection was made again) is held while the history fills
// the gap. So the timeline never shows an event twice nor skips one.

import { api, enc, cursorSeq, ApiError } from "./api.js";
import { $, h, fill } from "./dom.js";
import { Timeline } from "./model.js";
import { renderMessage } from "./render.js";

export const PAGE = 50; // messages of the newest page, drawn when a session opens
const OLDER_PAGE = 200; // messages per older page fetched on scroll
const WINDOW = 300; // messages in the DOM at most
const STEP = 100; // messages the window moves by
const NEAR = 600; // px from the top or the bottom that moves the window
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
    this.nodes = new Map(); // id -> element, for the messages in the window
    this.top = null; // id of the window's first message (null: the oldest held)
    this.bottom = null; // id of its last message, null while the window ends at the newest
    this.closed = false;
    this.frame = 0;
  }

  /** The session's route *rest*: under a shared link, the link's own read-only routes. */
  path(rest = "") {
    return this.app.readOnly ? `api/session${rest}` : `api/session/${enc(this.id)}${rest}`;
  }

  /** Take *info* (a `session.updated`'s) over the session's: a link taken away is gone. */
  update(info) {
    this.info = { ...this.info, ...info };
    if (!info.share) delete this.info.share;
  }

  /** Fetch the newest page, catch up from its seq, draw; resolves once drawn. */
  async open() {
    $("todos").hidden = true;
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
    this.loadTodos();
    await this.catchUp();
    await this.loadRequests();
    this.observeTop();
  }

  close() {
    this.closed = true;
    if (this.onScroll) $("timeline").removeEventListener("scroll", this.onScroll);
  }

  /** A frame of the live connection for this session. */
  onFrame(frame) {
    if (frame.seq == null) {
      if (!this.ready) return; // the snapshot and the history cover what came before
      if (frame.type === "session.updated") {
        this.update(frame.properties?.info ?? {});
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
    if (event.type === "session.updated" && event.data?.info) this.update(event.data.info);
    if (event.type === "session.next.step.ended") this.refreshInfo();
    if (event.type === "todo.updated" && Array.isArray(event.data?.todos)) this.drawTodos(event.data.todos);
    this.schedule();
  }

  /** The session's todo list (`GET .../todo`); `todo.updated` events replace it after. */
  async loadTodos() {
    try {
      const todos = (await api(this.path("/todo"))).data;
      if (!this.closed && !this.todosSeen) this.drawTodos(todos);
    } catch (e) {
      this.app.showError(e);
    }
  }

  /** Show *todos* (the session's whole list), hidden while it is empty. */
  drawTodos(todos) {
    this.todosSeen = true;
    const box = $("todos");
    box.hidden = todos.length === 0;
    const done = todos.filter((t) => t.status === "completed").length;
    box.querySelector("summary").textContent = `Todo: ${done} of ${todos.length} done`;
    const mark = { completed: "☑", in_progress: "▶", cancelled: "✕", pending: "☐" };
    fill(box.querySelector("ol"), todos.map((t) =>
      h("li", { class: `todo ${t.status}`, dataset: { priority: t.priority } },
        h("span", { class: "mark", text: (mark[t.status] ?? "☐") + " " }), h("span", { text: t.content }))));
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
    const stick = this.bottom === null && this.atEnd();
    this.reconcile();
    this.drawQueued();
    this.drawHead();
    if (stick) this.scrollToEnd();
  }

  /** The ids of the window: from `top` to `bottom` (or the newest), at most WINDOW. */
  windowIds() {
    const order = this.model.order;
    let from = this.top === null ? 0 : Math.max(0, order.indexOf(this.top));
    let to = this.bottom === null ? order.length : order.indexOf(this.bottom) + 1;
    if (to <= from) to = Math.min(order.length, from + WINDOW);
    if (to - from > WINDOW) {
      if (this.bottom === null) from = to - WINDOW;
      else to = from + WINDOW;
    }
    // from the oldest held: stays so when a message comes in before the first one shown (a
    // prompt's message is put before the answer streaming after it)
    this.top = from === 0 ? null : order[from];
    return order.slice(from, to);
  }

  /** Make the DOM hold the window's messages in order, drawing changed ones again, and keep
   * what the reader looks at where it was. */
  reconcile() {
    const container = $("messages");
    const timeline = $("timeline");
    const anchor = [...container.children].find((el) => el.getBoundingClientRect().bottom > timeline.getBoundingClientRect().top);
    const anchorTop = anchor?.getBoundingClientRect().top;
    const want = this.windowIds();
    const keep = new Set(want);
    for (const [id, el] of this.nodes) {
      if (!keep.has(id)) {
        el.remove();
        this.nodes.delete(id);
      }
    }
    let cursor = container.firstChild;
    for (const id of want) {
      let el = this.nodes.get(id);
      if (!el || this.model.changed.has(id)) {
        const fresh = renderMessage(this.model.messages.get(id), this.actions());
        if (el) {
          keepOpen(el, fresh);
          if (cursor === el) cursor = fresh;
          el.replaceWith(fresh);
        }
        el = fresh;
        this.nodes.set(id, el);
      }
      if (cursor === el) cursor = cursor.nextSibling;
      else container.insertBefore(el, cursor);
    }
    this.model.changed.clear();
    if (anchor && anchor.isConnected) timeline.scrollTop += anchor.getBoundingClientRect().top - anchorTop;
    this.drawEdges();
  }

  drawAll() {
    this.reconcile();
    this.drawQueued();
  }

  /** Below the window: the prompts waiting for their turn, or, while the window is not at the
   * newest message, a way back to it. */
  drawQueued() {
    if (this.bottom !== null) {
      fill($("queued"), h("button", { type: "button", class: "link newest", text: "Newer messages below: show the newest", onclick: () => this.showNewest() }));
      return;
    }
    fill($("queued"), [...this.model.queued.entries()].map(([id, q]) =>
      h("article", { class: "msg user queued", dataset: { id } },
        h("div", { class: "meta" }, h("span", { text: `You · ${q.delivery === "queue" ? "queued" : "waiting"}` })),
        h("div", { class: "text", text: q.text }))));
  }

  drawHead() {
    const i = this.info;
    const notes = this.model.info;
    const busy = this.app.busy.has(this.id);
    const ro = this.app.readOnly;
    fill($("session-head"),
      h("h2", { text: i.title || i.id }),
      h("div", { class: "meta" },
        h("span", { class: "dir", text: i.location?.directory ?? "" }),
        h("span", { class: "badge " + (busy ? "busy" : "idle"), text: busy ? "busy" : "idle" }),
        h("span", { text: `${(i.tokens?.input ?? 0) + (i.tokens?.output ?? 0)} tokens · $${Number(i.cost ?? 0).toFixed(4)}` })),
      (notes.lastError ?? i.lastError) && h("div", { class: "step-error", role: "alert", text: "Run failed: " + ((notes.lastError ?? i.lastError).message ?? "") }),
      !ro && this.shareControl(),
      (notes.needsResume || i.needsResume) && h("div", { class: "note" }, "A restart cut this session's work short. ",
        !ro && h("button", { type: "button", text: "Resume", onclick: () => this.act(() => api(this.path("/resume"), { method: "POST" })) })),
      notes.retry && h("div", { class: "note", text: `Retrying (attempt ${notes.retry.attempt}): ${notes.retry.error?.message ?? ""}` }),
      i.revert && h("div", { class: "note revert" }, "Messages after an undo are hidden. ",
        !ro && h("button", { type: "button", text: "Redo", onclick: () => this.act(() => api(this.path("/revert/clear"), { method: "POST" })) }), " ",
        !ro && h("button", { type: "button", text: "Keep undone", onclick: () => this.act(() => api(this.path("/revert/commit"), { method: "POST" })) })));
    if (ro) return;
    $("abort").disabled = !busy;
    $("send").textContent = busy ? "Steer" : "Send";
  }

  /** Share (a read-only link on this server, `POST .../share`) or the link and Unshare. */
  shareControl() {
    const set = (method) => this.act(async () => {
      this.update((await api(this.path("/share"), { method })).data);
      this.drawHead();
    });
    const url = this.info.share?.url;
    if (!url) return h("div", { class: "share" }, h("button", { type: "button", id: "share", text: "Share", title: "A read-only link anyone with it can open", onclick: () => set("POST") }));
    return h("div", { class: "share" }, "Shared, read-only: ",
      h("a", { id: "share-link", href: url, target: "_blank", rel: "noopener noreferrer", text: url }),
      h("button", { type: "button", id: "unshare", text: "Unshare", onclick: () => set("DELETE") }));
  }

  actions() {
    if (this.app.readOnly) return {};
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

  /** Move the window when the reader scrolls near its top or bottom. */
  observeTop() {
    this.onScroll = () => this.moveWindow();
    $("timeline").addEventListener("scroll", this.onScroll, { passive: true });
    this.drawEdges();
    this.moveWindow();
  }

  moveWindow() {
    if (this.closed || this.moving) return;
    const t = $("timeline");
    const order = this.model.order;
    if (t.scrollTop < NEAR) {
      const first = this.top === null ? 0 : order.indexOf(this.top);
      if (first > 0) {
        this.top = order[Math.max(0, first - STEP)];
        const last = Math.min(order.length, Math.max(0, first - STEP) + WINDOW) - 1;
        this.bottom = last >= order.length - 1 ? null : order[last];
        this.reconcile();
      } else if (this.older) {
        this.fetchOlder();
      }
    } else if (this.bottom !== null && t.scrollHeight - t.scrollTop - t.clientHeight < NEAR) {
      const last = order.indexOf(this.bottom);
      const to = Math.min(order.length - 1, last + STEP);
      this.bottom = to >= order.length - 1 ? null : order[to];
      this.top = order[Math.max(0, to + 1 - WINDOW)];
      this.reconcile();
    }
  }

  drawEdges() {
    const atOldest = this.top === null || this.top === this.model.order[0];
    fill($("older"), atOldest ? (this.older ? (this.moving ? "loading older messages…" : "") : "Start of the session") : "");
    this.drawQueued();
  }

  showNewest() {
    this.bottom = null;
    this.top = null;
    this.reconcile();
    this.scrollToEnd();
  }

  /** Fetch the page before the oldest held and move the window up into it. */
  async fetchOlder() {
    this.moving = true;
    this.drawEdges();
    try {
      const page = await api(this.path(`/message?limit=${OLDER_PAGE}&cursor=${enc(this.older)}`));
      if (this.closed) return;
      const fresh = this.model.prepend(page.data.slice().reverse());
      this.older = page.cursor?.next ?? null;
      const order = this.model.order;
      const first = Math.max(0, fresh.length - STEP);
      this.top = order[first] ?? null;
      const last = Math.min(order.length, first + WINDOW) - 1;
      this.bottom = last >= order.length - 1 ? null : order[last];
    } finally {
      this.moving = false;
    }
    this.reconcile();
    if ($("timeline").scrollTop < NEAR) this.moveWindow(); // still near the top
  }

  /** Draw the pending requests; of overlapping calls, only the latest one's answer. */
  async loadRequests() {
    if (this.app.readOnly) return; // a shared link shows the timeline only
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

  /** Send the prompt box's text with *delivery* (`steer` or `queue`) and *files* (the file
   * parts of its mentions). */
  async prompt(text, delivery, files = []) {
    const prompt = files.length ? { text, files } : { text };
    await api(this.path("/prompt"), { method: "POST", body: { prompt, delivery } });
  }

  /** Run the Location's command *name* with *args* (its template becomes the prompt). */
  async command(name, args) {
    await api(this.path("/command"), { method: "POST", body: { command: name, arguments: args } });
  }

  /** The page's own commands (complete.js): share, unshare, compact. */
  async pageCommand(name) {
    if (name === "compact") {
      await api(this.path("/compact"), { method: "POST" });
      return;
    }
    this.update((await api(this.path("/share"), { method: name === "share" ? "POST" : "DELETE" })).data);
    this.drawHead();
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
