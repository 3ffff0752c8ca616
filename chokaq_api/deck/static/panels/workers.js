// Workers, as the API sees them: the worker registry (every worker refreshes its row on its heartbeat)
// joined with the jobs each holds. A worker not seen within Health.WorkerHeartbeatTimeout shows as gone.

import { get } from "../api.js";
import { fill, fmtNum, fmtSeconds, fmtTime, h, table } from "../dom.js";
import { errorBox } from "./common.js";

// The slots a worker runs now, and an operator's target it has not applied yet (PATCH /workers/{id}).
function concurrency(w) {
  if (w.concurrency == null) return "—";
  const target = w.desired_concurrency;
  return target != null && target !== w.concurrency ? `${w.concurrency} → ${target}` : String(w.concurrency);
}

export function render(section) {
  const body = h("div");
  section.append(h("p", { class: "muted", text: "Registered workers and every worker holding claimed jobs. A worker not seen within Health.WorkerHeartbeatTimeout is marked gone." }), body);
  async function load() {
    try {
      const { data } = await get("/workers");
      fill(body, data.length
        ? table("Workers", ["Worker", "Running", "Claimed", "Queues", "Last heartbeat", "Silent for", "Concurrency"],
          data.map((w) => h("tr", {},
            h("td", {}, w.worker_id, w.hosted ? h("span", { class: "badge", text: "this server" }) : null,
              w.alive === false ? h("span", { class: "badge", text: "worker gone" }) : null),
            h("td", { class: "num", text: fmtNum(w.processing) }),
            h("td", { class: "num", text: fmtNum(w.fetched) }),
            h("td", { text: w.queues.join(", ") || "—" }),
            h("td", { text: fmtTime(w.last_heartbeat_at) }),
            h("td", { class: "num", text: fmtSeconds(w.silent_seconds) }),
            h("td", { class: "num", text: concurrency(w) }))))
        : h("p", { text: "No worker is registered or holds a job." }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }
  load();
  const timer = setInterval(load, 3000);
  return { dispose: () => clearInterval(timer) };
}
