// The prompt box's completion: `@path` mentions of the open session's files (`GET
// /find/file`, fuzzy, in its directory) and `/command`s (the Location's, `GET /api/command`,
// and the page's own: share, unshare, compact). A list under the box offers the matches;
// arrows move, Enter or Tab takes one, Escape closes it. A path taken is sent with the
// prompt as a file part (`files: [{uri: "file://…", mime, name}]`), as OpenCode's UI sends
// a mention; a prompt that starts with a command's name runs the command instead.

import { api, enc } from "./api.js";
import { $, h, fill } from "./dom.js";

const SHOWN = 10; // completions offered at most
const MENTION = /(^|\s)@([^\s@]*)$/;
const COMMAND = /^\/(\S*)$/;
export const PAGE_COMMANDS = {
  share: "Share the session: a read-only link",
  unshare: "Take the session's link away",
  compact: "Compact the session's history now",
};

export class Completion {
  constructor(app) {
    this.app = app;
    this.box = $("prompt-text");
    this.list = $("completions");
    this.items = [];
    this.at = 0;
    this.picked = new Set(); // paths taken from the list, sent as file parts if still mentioned
    this.commands = new Map(); // directory -> the Location's commands
    this.asked = 0;
    this.box.addEventListener("input", () => this.update());
    this.box.addEventListener("keydown", (ev) => this.key(ev));
    this.box.addEventListener("blur", () => setTimeout(() => this.close(), 150));
  }

  directory() {
    return this.app.view?.info.location?.directory ?? "";
  }

  /** The text before the caret decides: a mention, a command, or nothing to complete. */
  async update() {
    const before = this.box.value.slice(0, this.box.selectionStart);
    const asked = ++this.asked;
    let items = [];
    try {
      const mention = MENTION.exec(before);
      const command = COMMAND.exec(before);
      if (mention) items = await this.files(mention[2]);
      else if (command) items = await this.commandItems(command[1]);
    } catch (e) {
      this.app.showError(e);
    }
    if (asked !== this.asked) return; // typed on meanwhile
    this.show(items);
  }

  async files(query) {
    const where = `directory=${enc(this.directory())}&query=${enc(query)}&limit=${SHOWN}`;
    const paths = await api(`find/file?${where}`);
    return paths.map((path) => ({ kind: "file", value: path, label: "@" + path }));
  }

  async commandItems(prefix) {
    const all = await this.commandList();
    return all.filter((c) => c.name.startsWith(prefix)).slice(0, SHOWN)
      .map((c) => ({ kind: "command", value: c.name, label: "/" + c.name, note: c.description ?? "" }));
  }

  /** The Location's commands and the page's own, by name. */
  async commandList() {
    const dir = this.directory();
    if (!this.commands.has(dir)) {
      const found = await api(`api/command?${enc("location[directory]")}=${enc(dir)}`);
      this.commands.set(dir, found.data);
    }
    const own = Object.entries(PAGE_COMMANDS).map(([name, description]) => ({ name, description, own: true }));
    const theirs = this.commands.get(dir).filter((c) => !(c.name in PAGE_COMMANDS));
    return [...own, ...theirs].sort((a, b) => a.name.localeCompare(b.name));
  }

  show(items) {
    this.items = items;
    this.at = 0;
    this.list.hidden = items.length === 0;
    this.draw();
  }

  draw() {
    fill(this.list, this.items.map((item, i) =>
      h("li", { role: "option", class: i === this.at ? "current" : null, "aria-selected": i === this.at ? "true" : "false",
        onmousedown: (ev) => { ev.preventDefault(); this.take(i); } },
        h("span", { class: "value", text: item.label }), item.note && h("small", { text: " " + item.note }))));
  }

  close() {
    this.show([]);
  }

  key(ev) {
    if (this.list.hidden || !this.items.length) return;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      const n = this.items.length;
      this.at = (this.at + (ev.key === "ArrowDown" ? 1 : n - 1)) % n;
      this.draw();
    } else if ((ev.key === "Enter" && !ev.ctrlKey && !ev.metaKey) || ev.key === "Tab") {
      ev.preventDefault();
      this.take(this.at);
    } else if (ev.key === "Escape") {
      ev.preventDefault();
      this.close();
    }
  }

  /** Put completion *i* in place of what it completes. */
  take(i) {
    const item = this.items[i];
    if (!item) return;
    const caret = this.box.selectionStart;
    const before = this.box.value.slice(0, caret);
    const after = this.box.value.slice(caret);
    const head = item.kind === "file" ? before.replace(MENTION, (_, space) => `${space}@${item.value} `) : `/${item.value} `;
    if (item.kind === "file") this.picked.add(item.value);
    this.box.value = head + after;
    this.box.selectionStart = this.box.selectionEnd = head.length;
    this.close();
    this.box.focus();
  }

  /** The file parts of *text*: each path taken from the list that the text still mentions. */
  attachments(text) {
    const dir = this.directory().replace(/\/+$/, "");
    const files = [];
    for (const path of this.picked) {
      if (!new RegExp(`(^|\\s)@${escape(path)}(?=\\s|$)`).test(text)) continue;
      const absolute = path.startsWith("/") ? path : `${dir}/${path}`;
      files.push({ uri: "file://" + absolute.split("/").map(enc).join("/"), mime: "text/plain", name: path });
    }
    return files;
  }

  /** The command *text* runs (`{name, arguments, own}`), or null for a prompt. */
  async command(text) {
    const found = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(text);
    if (!found) return null;
    const known = (await this.commandList()).find((c) => c.name === found[1]);
    return known ? { name: known.name, arguments: (found[2] ?? "").trim(), own: !!known.own } : null;
  }

  sent() {
    this.picked.clear();
    this.close();
  }
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
