// Pieces the panels share: role-aware action buttons, paging, debounced live refresh, error display.

import { ApiError } from "../api.js";
import { h, toast } from "../dom.js";

// A control that changes something. It is only offered when the token's role may do it (the API refuses
// anyway); `data-needs` names the ability so the tests can prove a reader sees none.
export function action(ctx, ability, label, onClick, attrs = {}) {
  if (!ctx.can(ability)) return null;
  return h("button", { type: "button", "data-needs": ability, ...attrs, onclick: guarded(onClick) }, label);
}

// Run an async click handler with its button disabled, showing an API error as a toast.
export function guarded(fn) {
  return async (event) => {
    const button = event && event.currentTarget;
    if (button) button.disabled = true;
    try {
      await fn(event);
    } catch (error) {
      toast(error instanceof ApiError ? error.message : String(error), "error");
    } finally {
      if (button && button.isConnected) button.disabled = false;
    }
  };
}

export function pager(label, pagination, page, onPage, noun = "jobs") {
  const total = pagination ? pagination.total : 0;
  const pages = pagination ? Math.max(1, pagination.total_pages) : 1;
  return h("nav", { class: "pager", "aria-label": `${label} pages` },
    h("button", { type: "button", disabled: page <= 1, onclick: () => onPage(page - 1), text: "← Newer" }),
    h("span", { "data-testid": "page-info", text: `page ${page.toLocaleString("en-US")} of ${pages.toLocaleString("en-US")} · ${total.toLocaleString("en-US")} ${noun}` }),
    h("button", { type: "button", disabled: page >= pages, onclick: () => onPage(page + 1), text: "Older →" }));
}

// Coalesce bursts of live events into one reload, at most every `ms`.
export function debounced(fn, ms = 300) {
  let timer = null;
  return () => {
    if (timer) return;
    timer = setTimeout(() => { timer = null; fn(); }, ms);
  };
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert", text: error instanceof ApiError ? error.message : String(error) });
}

export function form(fields, onSubmit, submitLabel = "Apply") {
  return h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); onSubmit(); } },
    fields, h("button", { type: "submit", text: submitLabel }));
}

// The values of a filter form's named controls, empty ones left out.
export function values(formEl) {
  const out = {};
  for (const el of formEl.querySelectorAll("[name]")) {
    const v = el.value.trim();
    if (!v) continue;
    out[el.name] = el.type === "datetime-local" ? `${v.length === 16 ? `${v}:00` : v}Z` : v;
  }
  return out;
}
