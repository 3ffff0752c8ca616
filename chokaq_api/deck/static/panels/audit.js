// Audit: who did what, newest first, with the before / after of edits.

import { get } from "../api.js";
import { fill, field, fmtNum, fmtTime, h } from "../dom.js";
import { beforeAfter } from "../inspector.js";
import { debounced, errorBox, form, pager, values } from "./common.js";

export function render(section) {
  const state = { filter: {}, page: 1 };
  const filters = form([
    field("Actor", h("input", { name: "actor" })), field("Action", h("input", { name: "action" })),
    field("Job", h("input", { name: "job_id" })), field("Plan", h("input", { name: "plan_id" })),
    field("Since (UTC)", h("input", { name: "since", type: "datetime-local" })),
  ], () => { state.filter = values(filters); state.page = 1; load(); }, "Filter");
  filters.setAttribute("aria-label", "Audit filters");
  const list = h("div");
  section.append(filters, list);

  async function load() {
    try {
      const { data, pagination } = await get("/audit", { ...state.filter, page: state.page, page_size: 50 });
      fill(list, 
        h("ol", { class: "trail audit" }, data.map((a) => h("li", {},
          h("time", { text: fmtTime(a.at) }), " ",
          h("span", { class: "actor", text: a.actor }), " ",
          h("strong", { class: "action", text: a.action }),
          a.job_id ? [" job ", h("span", { class: "mono", text: a.job_id })] : null,
          a.plan_id ? [" plan ", h("span", { class: "mono", text: a.plan_id })] : null,
          a.count > 1 ? ` · ${fmtNum(a.count)} jobs` : "",
          beforeAfter(a.details)))),
        data.length ? null : h("p", { class: "muted", text: "No audit entries match." }),
        pager("Audit", pagination, state.page, (page) => { state.page = page; load(); }, "entries"));
    } catch (error) {
      fill(list, errorBox(error));
    }
  }
  load();
  const refresh = debounced(load, 1000);
  return { onEvent: () => { if (state.page === 1) refresh(); } };
}
