// Building the DOM from data: every string becomes a text node or an attribute value, never
// markup, so what a model, a tool or a file name says is shown as text and runs nothing.

/** An element *tag* with *props* (class, text, dataset, on<event> handlers, attributes) and
 * *children* (nodes, or strings added as text; null, undefined and false are skipped). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  add(el, children);
  return el;
}

/** Append *children* to *el* as `h` does. */
export function add(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Empty *el*, then append *children*. */
export function fill(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

export const $ = (id) => document.getElementById(id);

/** A count for people: 12,345. */
export const count = (n) => (n == null ? "-" : Number(n).toLocaleString("en-US"));

/** A cost in dollars with four decimals. */
export const dollars = (n) => "$" + Number(n || 0).toFixed(4);

/** A time of day (or date and time when not today) for epoch milliseconds. */
export function when(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}
