// Markdown drawn as DOM. The model's text (answers, reasoning, compaction summaries) is cut
// into tokens by marked (`marked.esm.js`, vendored unchanged from the npm package marked
// 18.2.1, MIT: `marked.LICENSE.txt`); marked's own HTML renderer is never used. This module
// is the sanitizer: it builds elements from an allowlist of token types with dom.js (text
// nodes and attribute values only), so no HTML parser ever sees model text. Raw HTML in the
// text is shown as text, links open only http(s) and mailto addresses (in a new tab, without
// a referrer), images are never loaded (shown as a link to their address), and anything not
// on the list is shown as its source text.

import { Lexer } from "./marked.esm.js";
import { h } from "./dom.js";

const MAX_MARKDOWN = 100_000; // characters: a longer text is shown as plain text
const SAFE_URL = /^(?:https?:\/\/|mailto:)/i;

/** The nodes of *text* read as Markdown (GitHub's flavour, a newline is a line break). */
export function markdown(text) {
  if (!text) return [];
  if (text.length > MAX_MARKDOWN) return [h("p", { class: "plain", text })];
  let tokens;
  try {
    tokens = Lexer.lex(text, { gfm: true, breaks: true });
  } catch {
    return [h("p", { class: "plain", text })];
  }
  return blocks(tokens);
}

function blocks(tokens) {
  return (tokens ?? []).map(block);
}

function block(t) {
  switch (t.type) {
    case "space":
      return null;
    case "paragraph":
      return h("p", {}, inline(t.tokens));
    case "heading":
      return h(`h${Math.min(6, Math.max(1, Number(t.depth) || 1))}`, {}, inline(t.tokens));
    case "code":
      return h("pre", { class: "code", dataset: t.lang ? { lang: t.lang } : null }, h("code", { text: t.text }));
    case "blockquote":
      return h("blockquote", {}, blocks(t.tokens));
    case "list":
      return h(t.ordered ? "ol" : "ul", t.ordered && Number(t.start) > 1 ? { start: Number(t.start) } : {},
        t.items.map((i) => listItem(i)));
    case "table":
      return h("table", {},
        h("thead", {}, h("tr", {}, t.header.map((c) => h("th", {}, inline(c.tokens))))),
        h("tbody", {}, t.rows.map((row) => h("tr", {}, row.map((c) => h("td", {}, inline(c.tokens)))))));
    case "hr":
      return h("hr", {});
    case "text":
      return h("p", {}, t.tokens ? inline(t.tokens) : t.text);
    case "html": // shown as written
      return h("p", { class: "plain", text: t.text ?? t.raw ?? "" });
    default:
      return h("p", { class: "plain", text: t.raw ?? t.text ?? "" });
  }
}

function listItem(item) {
  const box = item.task ? (item.checked ? "☑ " : "☐ ") : null;
  // a tight list's items hold text tokens: their inline tokens go in the item itself
  const body = (item.tokens ?? []).map((t) => (!item.loose && t.type === "text" ? inline(t.tokens ?? [t]) : block(t)));
  return h("li", {}, box, body);
}

function inline(tokens) {
  return (tokens ?? []).map(span);
}

function span(t) {
  switch (t.type) {
    case "text":
      return t.tokens ? inline(t.tokens) : t.text;
    case "escape":
      return t.text;
    case "strong":
      return h("strong", {}, inline(t.tokens));
    case "em":
      return h("em", {}, inline(t.tokens));
    case "del":
      return h("del", {}, inline(t.tokens));
    case "codespan":
      return h("code", { text: t.text });
    case "br":
      return h("br", {});
    case "link":
      return link(t.href, t.title, inline(t.tokens));
    case "image":
      return link(t.href, t.title, "🖼 " + (t.text || t.href || "image"));
    case "html": // shown as written
      return t.text ?? t.raw ?? "";
    default:
      return t.raw ?? t.text ?? "";
  }
}

function link(href, title, children) {
  const url = String(href ?? "");
  if (!SAFE_URL.test(url)) return h("span", { class: "unsafe-link", title: url }, children);
  return h("a", { href: url, title: title || null, target: "_blank", rel: "noopener noreferrer nofollow" }, children);
}
