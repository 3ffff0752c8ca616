// Workers, as the API sees them: every worker holding fetched or processing jobs (with its newest
// heartbeat), plus the worker hosted by the serving process. chokaq keeps no worker registry, so an idle
// worker in another process does not appear.

import { get } from "../api.js";
import { fill, fmtNum, fmtSeconds, fmtTime, h, table } from "../dom.js";
import { errorBox } from "./common.js";

export function render(section) {
  const body = h("div");
  section.append(h("p", { class: "muted", text: "Workers holding claimed jobs, and the one hosted by this server. An idle worker in another process is not listed (there is no worker registry)." }), body);
  async function load() {
    try {
      const { data } = await get("/workers");
      fill(body, data.length
        ? table("Workers", ["Worker", "Running", "Claimed", "Queues", "Last heartbeat", "Silent for", "Concurrency"],
          data.map((w) => h("tr", {},
            h("td", {}, w.worker_id, w.hosted ? h("span", { class: "badge", text: "this server" }) : null),
            h("td", { class: "num", text: fmtNum(w.processing) }),
            h("td", { class: "num", text: fmtNum(w.fetched) }),
            h("td", { text: w.queues.join(", ") || "—" }),
            h("td", { text: fmtTime(w.last_heartbeat_at) }),
            h("td", { class: "num", text: fmtSeconds(w.silent_seconds) }),
            h("td", { class: "num", text: w.concurrency ?? "—" }))))
        : h("p", { text: "No worker holds a job, and none runs in this server." }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }
  load();
  const timer = setInterval(load, 3000);
  return { dispose: () => clearInterval(timer) };
}
