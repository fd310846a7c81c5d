// One session's timeline as data: its messages in the shapes of `GET /api/session/{id}/message`
// (SessionMessage), changed by its durable events and live deltas the way the server's
// projector changes them. Applying an event the snapshot already reflects changes nothing, so
// a snapshot followed by the events after a seq it may already contain comes out right.

const STREAMED = {
  "session.next.text.delta": ["textID", "text"],
  "session.next.reasoning.delta": ["reasoningID", "reasoning"],
};

export class Timeline {
  constructor() {
    this.messages = new Map(); // id -> message
    this.order = []; // ids, oldest first
    this.queued = new Map(); // admitted prompts not yet promoted: id -> {text, delivery}
    this.changed = new Set(); // ids to draw again
    this.reload = false; // a revert changed which messages are visible
    this.info = {}; // session-level notes: lastError, needsResume, retry, compacting
  }

  /** Older messages (oldest first) from a page, placed before the ones held. */
  prepend(messages) {
    const fresh = messages.filter((m) => !this.messages.has(m.id));
    for (const m of fresh) this.messages.set(m.id, m);
    this.order = [...fresh.map((m) => m.id), ...this.order];
    return fresh;
  }

  /** A message first seen now; durable ones go before the provisional ones streaming at the end. */
  put(message, provisional = false) {
    const old = this.messages.get(message.id);
    if (old) {
      Object.assign(old, message, { content: old.content ?? message.content });
      if (!provisional) delete old.provisional;
      this.changed.add(message.id);
      return old;
    }
    if (provisional) message.provisional = true;
    this.messages.set(message.id, message);
    let at = this.order.length;
    if (!provisional) {
      while (at > 0 && this.messages.get(this.order[at - 1]).provisional) at -= 1;
    }
    this.order.splice(at, 0, message.id);
    this.changed.add(message.id);
    return message;
  }

  assistant(id, data) {
    return (
      this.messages.get(id) ??
      this.put({ type: "assistant", id, time: { created: data.timestamp }, content: [] }, true)
    );
  }

  /** Whether a delta of message *id*, not held, belongs to a message newer than all held:
   * ids grow with time, and a late delta of an older message (one outside the window of
   * messages shown) must not add it at the end. */
  isNew(id) {
    const newest = this.order[this.order.length - 1];
    return newest === undefined || id > newest;
  }

  part(message, id, make) {
    message.content = message.content ?? [];
    let part = message.content.find((p) => p.id === id);
    if (!part) {
      part = make();
      message.content.push(part);
    }
    this.changed.add(message.id);
    return part;
  }

  /** Apply a live delta (no seq: never replayed; the durable *.ended carries the whole text). */
  delta(type, d) {
    if (d.assistantMessageID && !this.messages.has(d.assistantMessageID) && !this.isNew(d.assistantMessageID)) return;
    if (STREAMED[type]) {
      const [key, kind] = STREAMED[type];
      const m = this.assistant(d.assistantMessageID, d);
      const part = this.part(m, d[key], () => ({ type: kind, id: d[key], text: "" }));
      if (!part.done) part.text += d.delta;
    } else if (type === "session.next.tool.input.delta") {
      const m = this.assistant(d.assistantMessageID, d);
      const part = this.part(m, d.callID, () => ({ type: "tool", id: d.callID, name: "", state: { status: "pending", input: "" } }));
      if (part.state.status === "pending" && typeof part.state.input === "string") part.state.input += d.delta;
    } else if (type === "session.next.tool.output.delta") {
      const m = this.messages.get(d.assistantMessageID);
      const part = m?.content?.find((p) => p.id === d.callID);
      if (part && part.state.status === "running") {
        part.liveOutput = (part.liveOutput ?? "") + d.delta;
        this.changed.add(m.id);
      }
    } else if (type === "session.next.retried") {
      this.info.retry = d;
    } else if (type === "session.next.compaction.delta") {
      this.info.compacting = true;
    }
  }

  /** Apply one durable event (`type` and OpenCode's `data`). */
  apply(type, d) {
    const handler = HANDLERS[type];
    if (handler) handler(this, d);
  }
}

function tool(t, d) {
  const m = t.assistant(d.assistantMessageID, d);
  return t.part(m, d.callID, () => ({ type: "tool", id: d.callID, name: d.tool ?? d.name ?? "", state: { status: "pending", input: "" } }));
}

const inputOf = (part) => (typeof part.state.input === "object" && part.state.input) || {};

const HANDLERS = {
  "session.next.prompt.admitted": (t, d) => {
    if (!t.messages.has(d.messageID)) t.queued.set(d.messageID, { text: d.prompt?.text ?? "", delivery: d.delivery });
  },
  "session.next.prompt.promoted": (t, d) => {
    t.queued.delete(d.messageID);
    const p = d.prompt ?? {};
    t.put({ type: "user", id: d.messageID, time: { created: d.timeCreated ?? d.timestamp }, text: p.text ?? "", files: p.files ?? [], agents: p.agents ?? [] });
  },
  "session.next.step.started": (t, d) => {
    t.info.retry = null;
    t.info.lastError = null;
    t.info.needsResume = false;
    t.put({ type: "assistant", id: d.assistantMessageID, time: { created: d.timestamp }, agent: d.agent, model: d.model });
  },
  "session.next.step.ended": (t, d) => {
    const m = t.assistant(d.assistantMessageID, d);
    Object.assign(m, { finish: d.finish, cost: d.cost, tokens: d.tokens });
    m.time = { ...m.time, completed: d.timestamp };
    delete m.provisional;
    t.changed.add(m.id);
  },
  "session.next.step.failed": (t, d) => {
    const m = t.assistant(d.assistantMessageID, d);
    m.error = d.error;
    m.time = { ...m.time, completed: d.timestamp };
    delete m.provisional;
    t.changed.add(m.id);
  },
  "session.next.text.started": (t, d) => {
    t.part(t.assistant(d.assistantMessageID, d), d.textID, () => ({ type: "text", id: d.textID, text: "" }));
  },
  "session.next.text.ended": (t, d) => {
    const part = t.part(t.assistant(d.assistantMessageID, d), d.textID, () => ({ type: "text", id: d.textID }));
    Object.assign(part, { text: d.text, done: true });
  },
  "session.next.reasoning.started": (t, d) => {
    t.part(t.assistant(d.assistantMessageID, d), d.reasoningID, () => ({ type: "reasoning", id: d.reasoningID, text: "" }));
  },
  "session.next.reasoning.ended": (t, d) => {
    const part = t.part(t.assistant(d.assistantMessageID, d), d.reasoningID, () => ({ type: "reasoning", id: d.reasoningID }));
    Object.assign(part, { text: d.text, done: true });
  },
  "session.next.tool.input.started": (t, d) => {
    const part = tool(t, d);
    if (!part.name) part.name = d.name;
  },
  "session.next.tool.input.ended": (t, d) => {
    const part = tool(t, d);
    if (part.state.status === "pending") part.state = { status: "pending", input: d.text };
  },
  "session.next.tool.called": (t, d) => {
    const part = tool(t, d);
    part.name = d.tool;
    if (part.state.status === "pending") part.state = { status: "running", input: d.input };
  },
  "session.next.tool.success": (t, d) => {
    const part = tool(t, d);
    part.state = { status: "completed", input: inputOf(part), content: d.content ?? [], structured: d.structured ?? {} };
    delete part.liveOutput;
  },
  "session.next.tool.failed": (t, d) => {
    const part = tool(t, d);
    part.state = { status: "error", input: inputOf(part), content: part.state.content ?? [], structured: part.state.structured ?? {}, error: d.error };
    delete part.liveOutput;
  },
  "session.next.compaction.started": (t) => {
    t.info.compacting = true;
  },
  "session.next.compaction.ended": (t, d) => {
    t.info.compacting = false;
    t.put({ type: "compaction", id: d.messageID, time: { created: d.timestamp }, reason: d.reason, summary: d.text, recent: d.recent });
  },
  "session.next.synthetic": (t, d) => {
    t.put({ type: "synthetic", id: d.messageID, time: { created: d.timestamp }, text: d.text });
  },
  "session.next.context.updated": (t, d) => {
    t.put({ type: "system", id: d.messageID, time: { created: d.timestamp }, text: d.text });
  },
  "session.next.agent.switched": (t, d) => {
    t.put({ type: "agent-switched", id: d.messageID, time: { created: d.timestamp }, agent: d.agent });
  },
  "session.next.model.switched": (t, d) => {
    t.put({ type: "model-switched", id: d.messageID, time: { created: d.timestamp }, model: d.model });
  },
  "session.run.failed": (t, d) => {
    t.info.lastError = d.error;
  },
  "session.resume.needed": (t) => {
    t.info.needsResume = true;
  },
  "session.reverted": (t) => {
    t.reload = true;
  },
  "session.unreverted": (t) => {
    t.reload = true;
  },
  "session.revert.committed": (t) => {
    t.reload = true;
  },
};
