// Drawing one message of the timeline. Text of every origin (prompts, model output, reasoning,
// tool input and output, file names, errors) goes into the DOM as text nodes (dom.js); the
// model's answers, reasoning and compaction summaries are read as Markdown and drawn from an
// allowlist of elements (markdown.js), the rest is shown as written (`white-space:
// pre-wrap`). Nothing is ever parsed as HTML.

import { h, count, dollars, when } from "./dom.js";
import { markdown } from "./markdown.js";

const TITLE_KEYS = ["filePath", "path", "command", "pattern", "url", "description", "query"];

/** The element of *m* (a SessionMessage, possibly still streaming); *actions* has
 * `undo(messageID)` for user messages. */
export function renderMessage(m, actions) {
  const draw = KINDS[m.type] ?? unknown;
  const el = draw(m, actions);
  el.dataset.id = m.id;
  el.classList.add("msg");
  return el;
}

const KINDS = {
  user: (m, actions) =>
    h("article", { class: "user" },
      h("div", { class: "meta" }, h("span", { text: "You" }), h("time", { text: when(m.time?.created) }),
        actions?.undo && h("button", { type: "button", class: "link undo", title: "Revert to before this prompt", text: "Undo", onclick: () => actions.undo(m.id) })),
      h("div", { class: "text", text: m.text }),
      (m.files ?? []).map((f) => h("div", { class: "file", text: "📎 " + (f.name ?? f.uri ?? "file") }))),
  assistant: assistant,
  compaction: (m) =>
    h("article", { class: "compaction" },
      h("div", { class: "divider", text: `Compacted (${m.reason ?? "auto"}) · ${when(m.time?.created)}` }),
      h("details", { dataset: { key: "summary" } }, h("summary", { text: "Summary" }), h("div", { class: "text md" }, markdown(m.summary ?? "")))),
  synthetic: (m) => h("article", { class: "note" }, h("div", { class: "text", text: m.text })),
  system: (m) =>
    h("article", { class: "note" }, h("details", { dataset: { key: "system" } }, h("summary", { text: "Context updated" }), h("div", { class: "text", text: m.text }))),
  "agent-switched": (m) => h("article", { class: "note", text: `Agent: ${m.agent}` }),
  "model-switched": (m) => h("article", { class: "note", text: `Model: ${m.model?.providerID}/${m.model?.id}` }),
};

function unknown(m) {
  return h("article", { class: "note", text: `(${m.type} message)` });
}

function assistant(m) {
  const parts = (m.content ?? []).map((part) => (PARTS[part.type] ?? (() => null))(part));
  const busy = !m.time?.completed && !m.error;
  return h("article", { class: "assistant" + (busy ? " streaming" : "") },
    h("div", { class: "meta" },
      h("span", { text: m.agent ? `${m.agent}` : "assistant" }),
      m.model && h("span", { class: "model", text: `${m.model.providerID}/${m.model.id}` }),
      h("time", { text: when(m.time?.created) })),
    parts,
    m.error && h("div", { class: "step-error", role: "alert" }, h("b", { text: "Step failed: " }), h("span", { text: m.error.message ?? String(m.error) })),
    m.tokens && usage(m));
}

function usage(m) {
  const t = m.tokens;
  const cache = t.cache ? ` · cache ${count(t.cache.read)}/${count(t.cache.write)}` : "";
  const reasoning = t.reasoning ? ` · reasoning ${count(t.reasoning)}` : "";
  return h("div", { class: "usage", text: `tokens in ${count(t.input)} · out ${count(t.output)}${reasoning}${cache} · ${dollars(m.cost)}${m.finish ? " · " + m.finish : ""}` });
}

const PARTS = {
  text: (p) => h("div", { class: "text md" + (p.done ? "" : " live") }, markdown(p.text ?? "")),
  reasoning: (p) =>
    h("details", { class: "reasoning", dataset: { key: "r:" + p.id } }, h("summary", { text: p.done ? "Reasoning" : "Reasoning…" }), h("div", { class: "text md" }, markdown(p.text ?? ""))),
  tool: toolPart,
};

function toolTitle(input) {
  if (!input || typeof input !== "object") return "";
  for (const key of TITLE_KEYS) if (typeof input[key] === "string") return input[key];
  return "";
}

function outputText(state) {
  return (state.content ?? []).map((c) => (c.type === "text" ? c.text : c.uri ?? `(${c.type})`)).join("\n");
}

function toolPart(p) {
  const state = p.state ?? { status: "pending" };
  const input = state.input;
  const diff = state.structured?.diff;
  const body = [
    h("div", { class: "label", text: "Input" }),
    h("pre", { class: "input", text: typeof input === "string" ? input : JSON.stringify(input ?? {}, null, 2) }),
  ];
  if (typeof diff === "string" && diff) body.push(h("div", { class: "label", text: "Diff" }), renderDiff(diff));
  else if (p.name === "edit" && input && typeof input === "object" && typeof input.oldString === "string")
    body.push(h("div", { class: "label", text: "Change" }), renderDiff(pseudoDiff(input.oldString, input.newString ?? "")));
  const out = state.status === "running" ? p.liveOutput ?? "" : outputText(state);
  if (out) body.push(h("div", { class: "label", text: "Output" }), h("pre", { class: "output", text: out }));
  if (state.error) body.push(h("div", { class: "tool-error", text: state.error.message ?? String(state.error) }));
  return h("details", { class: `tool st-${state.status}`, dataset: { key: "t:" + p.id }, open: state.status === "error" || undefined },
    h("summary", {},
      h("span", { class: "badge", text: state.status }),
      h("b", { text: " " + (p.name || "tool") + " " }),
      h("span", { class: "title", text: toolTitle(input) })),
    body);
}

function pseudoDiff(before, after) {
  const lines = [];
  for (const line of before.split("\n")) lines.push("-" + line);
  for (const line of after.split("\n")) lines.push("+" + line);
  return lines.join("\n");
}

/** A unified diff as lines marked added, removed or hunk, all as text. */
export function renderDiff(diff) {
  const pre = h("pre", { class: "diff" });
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    const kind = line.startsWith("+++") || line.startsWith("---") ? "file" : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append(h("span", { class: kind, text: line + "\n" }));
  }
  return pre;
}
