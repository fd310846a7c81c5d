// The tab's one live connection: the `/api/event` stream, which carries every session's
// durable events (each with its seq) and live deltas. It shows its state (connecting, live,
// stale, reconnecting), reconnects with a growing pause after an error or a silence longer
// than the server's heartbeat allows, and tells the app each time it is connected again so
// that open sessions catch up from their last seq (see session.js).

import { here } from "./api.js";

// Silence allowed, in ms: until a heartbeat has shown the server's interval (10 s by default;
// it is counted from `server.connected`), 25 s before the connection shows stale and 45 s
// before it is made again; then 2.5 and 4.5 intervals (at least 1 and 2 s).
const STALE_AFTER = 25_000;
const DEAD_AFTER = 45_000;
const MAX_PAUSE = 5_000;

export class Live {
  /** *onFrame(frame)* gets every frame but the server's own; *onConnected()* runs after each
   * (re)connection; *onState(state)* on each change of state. */
  constructor({ onFrame, onConnected, onState }) {
    this.onFrame = onFrame;
    this.onConnected = onConnected;
    this.onState = onState;
    this.state = "connecting";
    this.source = null;
    this.attempt = 0;
    this.last = performance.now();
    this.connections = 0;
  }

  start() {
    this.connect();
    this.watcher = setInterval(() => this.watch(), 250);
  }

  /** Close the connection for good (a shared session that is no longer shared). */
  stop() {
    this.stopped = true;
    clearInterval(this.watcher);
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
    this.setState("closed");
  }

  /** Connect again after ``stop`` (the page signed in). */
  resume() {
    if (!this.stopped) return;
    this.stopped = false;
    this.attempt = 0;
    this.connections = 0;
    this.start();
  }

  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.onState(state);
  }

  connect() {
    clearTimeout(this.timer);
    this.setState(this.connections ? "reconnecting" : "connecting");
    const source = new EventSource(here("api/event"));
    this.source = source;
    this.last = performance.now();
    this.lastBeat = 0;
    source.onmessage = (message) => {
      if (this.source !== source) return;
      this.last = performance.now();
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame.type === "server.connected") {
        this.lastBeat = performance.now(); // the server's heartbeat interval starts now
        this.attempt = 0;
        this.connections += 1;
        this.setState("live");
        this.onConnected();
      } else if (frame.type === "server.heartbeat") {
        const now = performance.now();
        if (this.lastBeat) this.beat = now - this.lastBeat;
        this.lastBeat = now;
        if (this.state === "stale") this.setState("live");
      } else {
        if (this.state === "stale") this.setState("live");
        this.onFrame(frame);
      }
    };
    source.onerror = () => {
      if (this.source !== source) return;
      this.drop();
    };
  }

  drop() {
    if (this.stopped) return;
    if (this.source) this.source.close();
    this.source = null;
    this.setState("reconnecting");
    const pause = Math.min(MAX_PAUSE, 250 * 2 ** this.attempt);
    this.attempt += 1;
    this.timer = setTimeout(() => this.connect(), pause);
  }

  watch() {
    const silent = performance.now() - this.last;
    const stale = this.beat ? Math.max(1000, 2.5 * this.beat) : STALE_AFTER;
    const dead = this.beat ? Math.max(2000, 4.5 * this.beat) : DEAD_AFTER;
    if (this.source && silent > dead) this.drop();
    else if (this.state === "live" && silent > stale) this.setState("stale");
  }
}
