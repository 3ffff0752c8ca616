// Queues: pause / resume (operator), switch on/off, zombie timeout and max workers (admin).

import { get, patch } from "../api.js";
import { fill, fmtNum, fmtSeconds, h, table, toast } from "../dom.js";
import { action, debounced, errorBox } from "./common.js";

export function render(section, ctx) {
  const body = h("div");
  section.append(h("p", { class: "muted", text: "Pausing stops workers from fetching a queue's jobs; running jobs finish. Limits apply across all workers." }), body);

  async function change(name, fields, message) {
    await patch(`/queues/${encodeURIComponent(name)}`, fields);
    toast(message);
    await load();
  }

  function limits(q) {
    if (!ctx.can("queue_limits")) return h("td", { text: `${fmtSeconds(q.effective_zombie_timeout_seconds)} · ${q.max_workers ?? "no cap"}` });
    const zombie = h("input", { type: "number", min: 1, value: q.zombie_timeout_seconds ?? "", placeholder: String(q.effective_zombie_timeout_seconds), "aria-label": `Zombie timeout (s) of ${q.name}`, class: "narrow" });
    const cap = h("input", { type: "number", min: 1, value: q.max_workers ?? "", placeholder: "no cap", "aria-label": `Max workers of ${q.name}`, class: "narrow" });
    const number = (input) => (input.value.trim() === "" ? null : Number(input.value));
    return h("td", { class: "limits" }, zombie, cap,
      action(ctx, "queue_limits", "Save limits", () => change(q.name, { zombie_timeout_seconds: number(zombie), max_workers: number(cap) }, `Limits of ${q.name} saved`), { "aria-label": `Save limits of ${q.name}` }));
  }

  async function load() {
    try {
      const { data } = await get("/queues");
      fill(body, table("Queues", ["Queue", "State", "Pending", "Fetched", "Processing", "Zombie timeout · max workers", "Actions"],
        data.map((q) => h("tr", {},
          h("td", { text: q.name }),
          h("td", { text: !q.active ? "inactive" : q.paused ? "paused" : "running" }),
          h("td", { class: "num", text: fmtNum(q.pending) }),
          h("td", { class: "num", text: fmtNum(q.fetched) }),
          h("td", { class: "num", text: fmtNum(q.processing) }),
          limits(q),
          h("td", { class: "actions" },
            action(ctx, "pause", q.paused ? "Resume" : "Pause", () => change(q.name, { paused: !q.paused }, `${q.name} ${q.paused ? "resumed" : "paused"}`), { "aria-label": `${q.paused ? "Resume" : "Pause"} ${q.name}` }),
            action(ctx, "queue_limits", q.active ? "Switch off" : "Switch on", () => change(q.name, { active: !q.active }, `${q.name} switched ${q.active ? "off" : "on"}`), { "aria-label": `${q.active ? "Switch off" : "Switch on"} ${q.name}` }))))));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }
  load();
  const refresh = debounced(load, 500);
  return { onEvent: (e) => { if (e.kind === "queue") refresh(); } };
}
