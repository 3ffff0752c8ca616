// DOM helpers. Every value is set as text (textContent / attributes), never parsed as HTML: data from the
// database (payloads, tags, error details, queue names) cannot become markup or script.

export function h(tag, props = {}, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === "class") el.setAttribute("class", value);
    else if (key === "text") el.textContent = String(value);
    else if (key === "value") el.value = value;
    else if (key === "checked" || key === "disabled" || key === "selected") el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);

export function fmtTime(iso) {
  if (!iso) return "—";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace(/(Z|\+00:00)$/, " UTC");
}

export function fmtNum(n, digits = 0) {
  if (n === null || n === undefined) return "—";
  return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function fmtSeconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${fmtNum(s, 1)} s`;
  if (s < 7200) return `${fmtNum(s / 60, 1)} min`;
  return `${fmtNum(s / 3600, 1)} h`;
}

export function firstLine(text, max = 120) {
  const line = String(text || "").split("\n").filter((l) => l.trim()).pop() || "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

let toastTimer = null;
export function toast(message, kind = "info") {
  const el = $("#toast");
  el.textContent = message;
  el.className = `toast show ${kind}`;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.className = "toast"; }, 6000);
}

// A labelled form field: <label> + control, so every control has an accessible name.
let fieldCounter = 0;
export function field(label, control, hint) {
  const id = control.id || `f${++fieldCounter}`;
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id, text: label }), control, hint ? h("small", { text: hint }) : null);
}

export function select(name, options, value) {
  return h("select", { name }, options.map(([v, label]) => h("option", { value: v, selected: v === value, text: label })));
}

// A definition table of label -> value rows (the Inspector's field table).
export function facts(rows) {
  return h("dl", { class: "facts" }, rows.map(([label, value, attrs]) => [
    h("dt", { text: label }),
    h("dd", attrs || {}, value instanceof Node ? value : (value === null || value === undefined || value === "" ? "—" : String(value))),
  ]));
}

export function table(caption, headers, rows, attrs = {}) {
  return h("table", attrs,
    h("caption", { class: "sr-only", text: caption }),
    h("thead", {}, h("tr", {}, headers.map((c) => (c instanceof Node ? h("th", { scope: "col" }, c) : h("th", { scope: "col", text: c }))))),
    h("tbody", {}, rows));
}

// Typed confirmation for destructive or large actions: resolves true only when `word` was typed.
export function confirmTyped({ title, body, word }) {
  const dialog = $("#confirm");
  const input = $("#confirm-input");
  const ok = $("#confirm-ok");
  $("#confirm-title").textContent = title;
  $("#confirm-body").textContent = body;
  $("#confirm-label").textContent = `Type ${word} to confirm`;
  input.value = "";
  ok.disabled = true;
  input.oninput = () => { ok.disabled = input.value.trim() !== word; };
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    $("#confirm-cancel").onclick = () => done(false);
    dialog.onclose = () => resolve(dialog.returnValue === "ok" && input.value.trim() === word);
    $("#confirm-form").onsubmit = (event) => {
      event.preventDefault();
      if (input.value.trim() === word) done(true);
    };
    dialog.showModal();
    input.focus();
  });
}

// Replace an element's children (null / false children are skipped, strings become text).
export function fill(el, ...children) {
  return append(clear(el), children);
}
