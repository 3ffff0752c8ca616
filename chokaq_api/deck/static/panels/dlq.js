// The DLQ panel: filters (reason, queue, type, error group, time range, search), paging on the API's
// fast DLQ pages (exact totals and deep pages without an OFFSET scan, at millions of rows), multi-select
// by page or by filter, the Inspector beside the list, and live arrivals.

import { REASONS, get } from "../api.js";
import { fill, field, firstLine, fmtNum, fmtTime, h, select, toast } from "../dom.js";
import { inspect } from "../inspector.js";
import { action, debounced, errorBox, form, pager, values } from "./common.js";

const PAGE_SIZE = 50;
const LIVE_KINDS = new Set(["dlq", "resurrect", "purge", "edit", "rescue", "cancel", "plan"]);

export function render(section, ctx, params = {}) {
  const state = { filter: { ...(params.filter || {}) }, page: 1, selected: new Set(), all: false, rows: [], pagination: null, open: null };
  const inputs = {
    reason: select("reason", [["", "any reason"], ...REASONS.map((r) => [r, r])], state.filter.reason || ""),
    queue: h("input", { name: "queue", value: state.filter.queue || "" }),
    type: h("input", { name: "type", value: state.filter.type || "" }),
    fingerprint: h("input", { name: "fingerprint", value: state.filter.fingerprint || "", spellcheck: "false", size: 18 }),
    failed_from: h("input", { name: "failed_from", type: "datetime-local" }),
    failed_to: h("input", { name: "failed_to", type: "datetime-local" }),
    search: h("input", { name: "search", type: "search", value: state.filter.search || "" }),
  };
  const filters = form([
    field("Reason", inputs.reason), field("Queue", inputs.queue), field("Type", inputs.type),
    field("Error group", inputs.fingerprint), field("Failed from (UTC)", inputs.failed_from),
    field("Failed to (UTC)", inputs.failed_to), field("Search", inputs.search, "id, type, tags, error text"),
  ], () => { state.filter = values(filters); state.page = 1; clearSelection(); load(); }, "Filter");
  filters.setAttribute("aria-label", "DLQ filters");
  const bulk = h("div", { class: "bulkbar", role: "region", "aria-label": "Selection" });
  const list = h("div", { class: "list", "aria-busy": "true" });
  const aside = h("aside", { class: "inspector", "aria-labelledby": "inspector-title", hidden: true });
  section.append(filters, bulk, h("div", { class: "split" }, list, aside));

  function clearSelection() { state.selected.clear(); state.all = false; }

  function selectionBody() {
    return state.all ? { filter: state.filter } : { ids: [...state.selected] };
  }

  function renderBulk() {
    const count = state.all ? state.pagination?.total ?? 0 : state.selected.size;
    const pageIds = state.rows.map((r) => r.id);
    const pageAll = pageIds.length > 0 && pageIds.every((id) => state.selected.has(id));
    const canWidenToFilter = pageAll && !state.all && (state.pagination?.total ?? 0) > pageIds.length && Object.keys(state.filter).length > 0;
    fill(bulk, 
      h("span", { "data-testid": "selection-count", text: count ? `${fmtNum(count)} selected${state.all ? " (every job matching the filter)" : ""}` : "Nothing selected" }),
      canWidenToFilter ? h("button", { type: "button", class: "link", onclick: () => { state.all = true; renderBulk(); }, text: `Select all ${fmtNum(state.pagination.total)} matching the filter` }) : null,
      count ? h("button", { type: "button", class: "link", onclick: () => { clearSelection(); renderList(); }, text: "Clear selection" }) : null,
      count ? action(ctx, "plan", "Plan resurrect…", () => ctx.navigate("plans", { create: { action: "resurrect", ...selectionBody() } })) : null,
      count ? action(ctx, "purge", "Plan purge…", () => ctx.navigate("plans", { create: { action: "purge", ...selectionBody() } }), { class: "danger" }) : null,
      !count && Object.keys(state.filter).length && ctx.can("plan")
        ? h("button", { type: "button", "data-needs": "plan", onclick: () => ctx.navigate("plans", { create: { action: "resurrect", filter: state.filter } }), text: "Plan resurrect of the filter…" })
        : null);
  }

  function renderList() {
    const pageIds = state.rows.map((r) => r.id);
    const all = h("input", { type: "checkbox", "aria-label": "Select every job on this page", checked: pageIds.length > 0 && pageIds.every((id) => state.selected.has(id)) });
    all.addEventListener("change", () => {
      for (const id of pageIds) (all.checked ? state.selected.add(id) : state.selected.delete(id));
      if (!all.checked) state.all = false;
      renderList();
    });
    const body = state.rows.map((job) => {
      const box = h("input", { type: "checkbox", "aria-label": `Select ${job.id}`, checked: state.all || state.selected.has(job.id), disabled: state.all });
      box.addEventListener("change", () => { (box.checked ? state.selected.add(job.id) : state.selected.delete(job.id)); renderBulk(); });
      return h("tr", { "data-id": job.id, class: state.open === job.id ? "open" : "" },
        h("td", {}, box),
        h("td", {}, h("button", { type: "button", class: "link mono", "aria-label": `Inspect ${job.id}`, onclick: () => open(job.id), text: job.id })),
        h("td", { text: job.type }),
        h("td", { text: job.queue }),
        h("td", {}, h("span", { class: `reason reason-${job.failure_reason}`, text: job.failure_reason })),
        h("td", { class: "num", text: job.attempt_count }),
        h("td", { class: "time", text: fmtTime(job.failed_at) }),
        h("td", { class: "error-line", text: firstLine(job.error_details, 90) }));
    });
    fill(list, 
      h("table", { class: "dlq-table" },
        h("caption", { class: "sr-only", text: "Dead jobs" }),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, all), ["Job", "Type", "Queue", "Reason", "Attempts", "Failed at (UTC)", "Error"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, body)),
      state.rows.length ? null : h("p", { class: "muted", text: "No dead jobs match." }),
      pager("DLQ", state.pagination, state.page, (page) => { state.page = page; load(); }));
    list.setAttribute("aria-busy", "false");
    renderBulk();
  }

  async function load() {
    const started = performance.now();
    list.setAttribute("aria-busy", "true");
    try {
      const { data, pagination } = await get("/dlq", { ...state.filter, page: state.page, page_size: PAGE_SIZE });
      state.rows = data;
      state.pagination = pagination;
      renderList();
      list.dataset.renderedMs = String(Math.round(performance.now() - started));
    } catch (error) {
      fill(list, errorBox(error));
    }
  }

  function open(id) {
    state.open = id;
    for (const tr of list.querySelectorAll("tr[data-id]")) tr.classList.toggle("open", tr.dataset.id === id);
    inspect(aside, ctx, id, {
      dead: true,
      onChange: load,
      onSelectGroup: (fingerprint) => {
        inputs.fingerprint.value = fingerprint;
        state.filter = values(filters);
        state.page = 1;
        clearSelection();
        load();
        toast("Filtered by the error group");
      },
    });
  }

  load();
  if (params.open) open(params.open);
  const refresh = debounced(load, 250);
  return { onEvent: (event) => { if (LIVE_KINDS.has(event.kind)) refresh(); } };
}
