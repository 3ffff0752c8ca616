// Jobs: hot jobs (pending, fetched, processing) with filters and paging; cancel pending ones.

import { get, post } from "../api.js";
import { fill, confirmTyped, field, fmtNum, fmtTime, h, select, toast } from "../dom.js";
import { inspect } from "../inspector.js";
import { action, debounced, errorBox, form, pager, values } from "./common.js";

const PAGE_SIZE = 50;

export function render(section, ctx) {
  const state = { filter: {}, page: 1, selected: new Set(), rows: [], pagination: null };
  const filters = form([
    field("Status", select("status", [["", "any"], ["pending", "pending"], ["fetched", "fetched"], ["processing", "processing"]], "")),
    field("Queue", h("input", { name: "queue" })), field("Type", h("input", { name: "type" })),
    field("Tag", h("input", { name: "tag" })), field("Search", h("input", { name: "search", type: "search" })),
  ], () => { state.filter = values(filters); state.page = 1; state.selected.clear(); load(); }, "Filter");
  filters.setAttribute("aria-label", "Job filters");
  const bar = h("div", { class: "bulkbar", role: "region", "aria-label": "Selection" });
  const list = h("div", { class: "list" });
  const aside = h("aside", { class: "inspector", "aria-labelledby": "inspector-title", hidden: true });
  section.append(filters, bar, h("div", { class: "split" }, list, aside));

  async function cancel() {
    const ids = [...state.selected];
    if (ids.length > 100 && !(await confirmTyped({ title: `Cancel ${ids.length} jobs?`, body: "Pending and fetched jobs move to the DLQ as Cancelled; running ones are skipped.", word: `cancel ${ids.length}` }))) return;
    const { data } = await post("/jobs/cancel", { ids });
    toast(`${data.cancelled.length} cancelled, ${data.skipped.length} skipped (running or gone)`);
    state.selected.clear();
    load();
  }

  function render() {
    fill(bar, h("span", { text: state.selected.size ? `${fmtNum(state.selected.size)} selected` : "Nothing selected" }),
      state.selected.size ? action(ctx, "cancel", "Cancel selected", cancel, { class: "danger" }) : null);
    fill(list, 
      h("table", {},
        h("caption", { class: "sr-only", text: "Hot jobs" }),
        h("thead", {}, h("tr", {}, ["", "Job", "Type", "Queue", "Status", "Priority", "Attempts", "Worker", "Created (UTC)"].map((c) => h("th", { scope: "col", text: c })))),
        h("tbody", {}, state.rows.map((job) => {
          const box = h("input", { type: "checkbox", "aria-label": `Select ${job.id}`, checked: state.selected.has(job.id), disabled: job.status === "processing" });
          box.addEventListener("change", () => { (box.checked ? state.selected.add(job.id) : state.selected.delete(job.id)); render(); });
          return h("tr", {},
            h("td", {}, box),
            h("td", {}, h("button", { type: "button", class: "link mono", "aria-label": `Inspect ${job.id}`, onclick: () => inspect(aside, ctx, job.id, { onChange: load }), text: job.id })),
            h("td", { text: job.type }), h("td", { text: job.queue }), h("td", { text: job.status }),
            h("td", { class: "num", text: job.priority }), h("td", { class: "num", text: job.attempt_count }),
            h("td", { text: job.worker_id || "—" }), h("td", { class: "time", text: fmtTime(job.created_at) }));
        }))),
      state.rows.length ? null : h("p", { class: "muted", text: "No hot jobs match." }),
      pager("Jobs", state.pagination, state.page, (page) => { state.page = page; load(); }));
  }

  async function load() {
    try {
      const { data, pagination } = await get("/jobs", { ...state.filter, page: state.page, page_size: PAGE_SIZE });
      state.rows = data;
      state.pagination = pagination;
      render();
    } catch (error) {
      fill(list, errorBox(error));
    }
  }
  load();
  const refresh = debounced(load, 1000);
  return { onEvent: refresh };
}
