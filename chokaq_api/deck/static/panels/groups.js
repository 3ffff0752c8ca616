// Error groups: dead jobs grouped by fingerprint (exception type + normalised message + top frame), with
// counts, first / last seen, a trend on demand, and "select this group" (the DLQ filtered by it).

import { get } from "../api.js";
import { fill, fmtNum, fmtTime, h } from "../dom.js";
import { debounced, errorBox } from "./common.js";

const BUCKETS = 12;

export function render(section, ctx) {
  const body = h("div");
  section.append(h("p", { class: "muted", text: "The largest error groups among the newest 5,000 dead jobs." }), body);

  async function trend(group, box) {
    const from = Date.parse(group.first_seen);
    const to = Date.parse(group.last_seen) + 1000;
    const step = Math.max(1000, (to - from) / BUCKETS);
    const iso = (t) => new Date(t).toISOString().replace(/\.\d+Z$/, "Z");
    const counts = await Promise.all(Array.from({ length: BUCKETS }, (_, i) => get("/dlq", {
      fingerprint: group.fingerprint, failed_from: iso(from + i * step), failed_to: iso(from + (i + 1) * step - 1000), page_size: 1,
    }).then((r) => r.pagination.total)));
    const max = Math.max(1, ...counts);
    const svg = h("svg:svg", { viewBox: `0 0 ${BUCKETS * 10} 30`, width: BUCKETS * 10, height: 30, role: "img", "aria-label": `Trend from ${fmtTime(iso(from))}: ${counts.join(", ")}` },
      counts.map((n, i) => h("svg:rect", { x: i * 10 + 1, width: 8, y: 30 - Math.max(1, (n / max) * 30), height: Math.max(1, (n / max) * 30), class: "bar" },
        h("svg:title", { text: `${fmtNum(n)} from ${fmtTime(iso(from + i * step))}` }))));
    fill(box, svg);
  }

  async function load() {
    try {
      const { data } = await get("/dlq/summary", { top: 25 });
      fill(body, data.top_errors.length
        ? h("ol", { class: "groups" }, data.top_errors.map((g) => {
          const box = h("div", { class: "trend" });
          return h("li", { class: "group" },
            h("div", { class: "group-head" },
              h("strong", { class: "count", text: fmtNum(g.count) }), " ",
              h("span", { class: `reason reason-${g.failure_reason}`, text: g.failure_reason }), " ",
              h("span", { class: "exc", text: g.exception_type || "error" })),
            h("p", { class: "template", text: g.template || "" }),
            g.frame ? h("p", { class: "frame mono", text: g.frame }) : null,
            h("p", { class: "muted", text: `first ${fmtTime(g.first_seen)} · last ${fmtTime(g.last_seen)} · e.g. ${g.example_type || ""} in ${g.example_queue || ""}` }),
            h("div", { class: "row" },
              g.fingerprint ? h("button", { type: "button", onclick: () => ctx.navigate("dlq", { filter: { fingerprint: g.fingerprint } }), text: "Select this group", "aria-label": `Select the group ${g.fingerprint}` }) : null,
              g.fingerprint && g.first_seen ? h("button", { type: "button", onclick: (e) => { e.currentTarget.disabled = true; trend(g, box).catch((err) => box.append(errorBox(err))); }, text: "Show trend" }) : null,
              g.example_id ? h("button", { type: "button", class: "link", onclick: () => ctx.navigate("dlq", { filter: { fingerprint: g.fingerprint }, open: g.example_id }), text: "Inspect an example" }) : null),
            box);
        }))
        : h("p", { text: "The DLQ is empty." }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }
  load();
  const refresh = debounced(load, 2000);
  return { onEvent: (e) => { if (e.kind === "dlq" || e.kind === "purge" || e.kind === "resurrect") refresh(); } };
}
