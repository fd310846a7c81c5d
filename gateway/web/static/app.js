// The web app: the session list, the open session, and the tab's one live connection.
// Everything it shows comes from the public API (`/api/...`) and the `/api/event` stream.

import { api, ApiError } from "./api.js";
import { $ } from "./dom.js";
import { Live } from "./live.js";
import { Completion } from "./complete.js";
import { Pickers } from "./pickers.js";
import { SessionList } from "./sessions.js";
import { SessionView } from "./session.js";

const STATE_TEXT = {
  connecting: "connecting…",
  live: "live",
  stale: "stale: no word from the server",
  reconnecting: "offline: reconnecting…",
  closed: "closed",
};
// Under a shared link (`/s/<session>/<secret>/`, share.html) the page shows that one session,
// read-only, through the link's own routes (docs/web.md, "Sharing").
const SHARED = document.body.dataset.mode === "share";
const BUSY = new Set(["session.next.step.started", "session.next.prompt.promoted"]);
const SETTLING = new Set(["session.next.step.ended", "session.next.step.failed", "session.run.failed", "session.next.interrupt.requested"]);

class App {
  constructor() {
    this.busy = new Set();
    this.view = null;
    this.readOnly = SHARED;
    this.list = SHARED ? null : new SessionList(this);
    this.pickers = SHARED ? null : new Pickers(this);
    this.complete = SHARED ? null : new Completion(this);
    this.live = new Live({
      onFrame: (frame) => this.onFrame(frame),
      onConnected: () => this.onConnected(),
      onState: (state) => {
        $("conn").dataset.state = state;
        $("conn").textContent = STATE_TEXT[state] ?? state;
        if (SHARED && state === "reconnecting") this.checkShared();
        else if (state === "reconnecting") this.checkSignedIn();
      },
    });
    this.activeTimer = 0;
  }

  start() {
    if (SHARED) {
      this.live.start();
      const found = /^\/s\/([^/]+)\/[^/]+\/$/.exec(location.pathname);
      if (found) this.open(decodeURIComponent(found[1]));
      return;
    }
    $("signin").addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.signIn();
    });
    $("signout").addEventListener("click", () => this.signOut());
    $("new-session").addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.create($("new-dir").value.trim());
    });
    $("prompt").addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.send("steer");
    });
    $("queue").addEventListener("click", () => this.send("queue"));
    $("abort").addEventListener("click", () => this.view?.act(() => this.view.abort()));
    $("prompt-text").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        this.send("steer");
      }
    });
    window.addEventListener("hashchange", () => this.route());
    this.live.start();
    this.route();
  }

  sessionOf(frame) {
    const p = frame.properties ?? {};
    return p.sessionID ?? p.info?.id ?? null;
  }

  onFrame(frame) {
    const sid = this.sessionOf(frame);
    if (!sid) return;
    if (BUSY.has(frame.type) || (frame.seq == null && frame.type.endsWith(".delta"))) this.setBusy(sid, true);
    else if (SETTLING.has(frame.type)) this.refreshActive();
    if (!this.list) {
      // a shared session's stream carries that session only
    } else if (frame.type === "session.updated" && frame.properties?.info) this.list.put({ id: sid, ...frame.properties.info });
    else if (frame.type === "session.deleted") this.list.sessions.delete(sid), this.list.draw();
    else if (!this.list.sessions.has(sid)) this.refreshList();
    if (this.view?.id === sid) this.view.onFrame(frame);
  }

  setBusy(sid, busy) {
    const had = this.busy.has(sid);
    if (busy === had) return;
    if (busy) this.busy.add(sid);
    else this.busy.delete(sid);
    this.list?.draw();
    if (this.view?.id === sid) this.view.drawHead();
  }

  /** The sessions running now, shortly after a run may have settled. */
  refreshActive(pause = 150) {
    clearTimeout(this.activeTimer);
    this.activeTimer = setTimeout(async () => {
      try {
        const active = await api("api/session/active");
        const now = new Set(Object.keys(active.data));
        for (const sid of [...this.busy]) if (!now.has(sid)) this.setBusy(sid, false);
        for (const sid of now) this.setBusy(sid, true);
        // a run that was settling is looked at again until it is idle
        if (this.busy.size) this.refreshActive(1000);
      } catch (e) {
        this.showError(e);
      }
    }, pause);
  }

  refreshList() {
    clearTimeout(this.listTimer);
    this.listTimer = setTimeout(() => this.list.load().catch((e) => this.showError(e)), 200);
  }

  async onConnected() {
    if (!SHARED && !this.signedIn) this.showWho();
    try {
      if (this.list) await this.list.load();
      this.refreshActive();
      if (this.list) $("side-error").hidden = true;
    } catch (e) {
      this.showError(e);
    }
    this.view?.reconnected();
  }

  /** Under a shared link: whether it still opens the session (the stream ended, or cannot
   * be made again); once it answers 404, the page says so and stops. */
  checkShared() {
    api("api/session").catch((e) => {
      if (!(e instanceof ApiError) || e.status !== 404) return;
      this.live.stop();
      this.view?.close();
      this.view = null;
      $("session").hidden = true;
      $("empty").hidden = false;
      $("empty").textContent = "This session is no longer shared.";
      document.body.dataset.session = "";
    });
  }

  /** The live stream dropped: on a token server, whether the page is still signed in (a
   * revoked or expired token, or a sign-out elsewhere, brings back the sign-in form). */
  checkSignedIn() {
    api("api/session/active").catch((e) => this.needSignIn(e));
  }

  /** Whether *e* is a token server's 401 (then the sign-in form is shown). */
  needSignIn(e) {
    if (SHARED || !(e instanceof ApiError) || !e.bearer) return false;
    this.showSignIn(this.signedIn ? "The sign-in ended: the token was revoked or expired, or it signed out elsewhere." : "");
    return true;
  }

  /** Show the sign-in form instead of the sessions (the live stream stopped), with *message*. */
  showSignIn(message = "") {
    this.live.stop();
    this.view?.close();
    this.view = null;
    $("session").hidden = true;
    $("empty").hidden = false;
    $("layout").hidden = true;
    $("who").hidden = true;
    $("signout").hidden = true;
    $("signin").hidden = false;
    $("signin-error").textContent = message;
    this.signedIn = false;
    document.body.dataset.session = "";
    document.body.dataset.signin = "required";
    $("signin-token").focus();
  }

  /** On a page reloaded while signed in: who it is, and its Sign out button. */
  async showWho() {
    try {
      const who = (await api("api/signin")).data;
      if (who.signedIn) this.signedInAs(who);
    } catch {
      // a server without the route, or the stream dropped: the header stays as it is
    }
  }

  signedInAs(who) {
    $("who").textContent = `${who.user} · ${who.role}${who.project === "*" ? "" : ` · ${who.project}`}`;
    $("who").hidden = false;
    $("signout").hidden = false;
    this.signedIn = true;
    document.body.dataset.signin = "done";
  }

  /** Send the token once (`POST /api/signin`); the answer's cookie signs every later
   * request of the page in, the live stream included. */
  async signIn() {
    const token = $("signin-token").value.trim();
    if (!token) return;
    try {
      const who = (await api("api/signin", { method: "POST", body: { token } })).data;
      $("signin-token").value = "";
      $("signin-error").textContent = "";
      $("signin").hidden = true;
      $("layout").hidden = false;
      this.signedInAs(who);
      this.live.resume();
      this.route();
    } catch (e) {
      $("signin-error").textContent = e instanceof ApiError ? `${e.tag}: ${e.message}` : `unreachable: ${e}`;
    }
  }

  async signOut() {
    this.signedIn = false;
    try {
      await api("api/signout", { method: "POST" });
    } catch (e) {
      this.showError(e);
      return;
    }
    this.showSignIn();
  }

  showError(e) {
    if (this.needSignIn(e)) return;
    if (!this.list) {
      $("empty").hidden = false;
      $("empty").textContent = e instanceof ApiError ? `${e.tag}: ${e.message}` : `unreachable: ${e}`;
      return;
    }
    const box = $("side-error");
    box.hidden = false;
    box.textContent = e instanceof ApiError ? `${e.tag}: ${e.message}` : `unreachable: ${e}`;
  }

  route() {
    const found = /^#\/session\/([^/]+)$/.exec(location.hash);
    if (found) this.open(decodeURIComponent(found[1]));
  }

  async open(sid) {
    if (this.view?.id === sid) return;
    this.view?.close();
    this.view = null;
    const opening = (this.opening = (this.opening ?? 0) + 1);
    performance.mark("session-open", { detail: sid });
    try {
      const info = (await api(SHARED ? "api/session" : `api/session/${encodeURIComponent(sid)}`)).data;
      if (opening !== this.opening) return; // another open came after this one
      const view = new SessionView(info, this);
      this.view = view;
      $("empty").hidden = true;
      $("session").hidden = false;
      this.list?.draw();
      await view.open();
      if (this.view !== view) return;
      document.body.dataset.session = sid;
      performance.mark("session-drawn", { detail: sid });
      this.pickers?.show(view);
    } catch (e) {
      this.showError(e);
    }
  }

  reopen(sid) {
    if (this.view?.id === sid) {
      this.view.close();
      this.view = null;
    }
    return this.open(sid);
  }

  async create(directory) {
    try {
      const body = directory ? { location: { directory } } : {};
      const info = (await api("api/session", { method: "POST", body })).data;
      this.list.put(info);
      $("new-dir").value = "";
      $("side-error").hidden = true;
      location.hash = `#/session/${encodeURIComponent(info.id)}`;
    } catch (e) {
      this.showError(e);
    }
  }

  async send(delivery) {
    const box = $("prompt-text");
    const text = box.value.trim();
    if (!text || !this.view) return;
    const view = this.view;
    await view.act(async () => {
      const command = await this.complete.command(text);
      if (command?.own) await view.pageCommand(command.name);
      else if (command) await view.command(command.name, command.arguments);
      else await view.prompt(text, delivery, this.complete.attachments(text));
      box.value = "";
      this.complete.sent();
    });
  }
}

new App().start();
