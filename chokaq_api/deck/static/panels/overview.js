// Overview: counts per location and queue, throughput and failure rate, queue lag against the Deck's
// warning / critical thresholds, and the newest live events.

import { get } from "../api.js";
import { fill, fmtNum, fmtSeconds, fmtTime, h, table } from "../dom.js";
import { debounced, errorBox } from "./common.js";

export function lagLevel(seconds, lag) {
  if (seconds >= lag.critical) return "critical";
  if (seconds >= lag.warning) return "warning";
  return "ok";
}

export function render(section, ctx) {
  const body = h("div", { class: "overview" });
  section.append(body);

  async function load() {
    try {
      const [{ data: s }, { data: queues }] = await Promise.all([get("/stats"), get("/queues")]);
      fill(body, 
        h("div", { class: "cards" },
          card("Hot", s.hot, `${fmtNum(s.pending)} pending · ${fmtNum(s.fetched)} fetched · ${fmtNum(s.processing)} processing`),
          card("Archive", s.archive, `${fmtNum(s.succeeded_total)} succeeded in total`),
          card("DLQ", s.dlq, `${fmtNum(s.failed_total)} dead now`, s.dlq ? "warn" : ""),
          card("Throughput", `${fmtNum(s.jobs_per_second_1m, 2)}/s`, `1 min · ${fmtNum(s.jobs_per_second_5m, 2)}/s over 5 min`),
          card("Failure rate", `${fmtNum(s.failure_rate_1m, 1)} %`, `1 min · ${fmtNum(s.failure_rate_5m, 1)} % over 5 min`, s.failure_rate_1m > 10 ? "warn" : "")),
        h("h2", { text: "Queues" }),
        table("Queues with their counts and lag",
          ["Queue", "State", "Pending", "Processing", "Lag (oldest due)", "Succeeded", "Dead"],
          queues.map((q) => {
            const level = lagLevel(q.max_lag_seconds, ctx.lag);
            return h("tr", {},
              h("td", { text: q.name }),
              h("td", { text: !q.active ? "inactive" : q.paused ? "paused" : "running" }),
              h("td", { class: "num", text: fmtNum(q.pending) }),
              h("td", { class: "num", text: fmtNum(q.processing) }),
              h("td", { class: `num lag-${level}`, title: `warning from ${ctx.lag.warning}s, critical from ${ctx.lag.critical}s` },
                `${fmtSeconds(q.max_lag_seconds)}${level === "ok" ? "" : ` (${level})`}`),
              h("td", { class: "num", text: fmtNum(q.succeeded_total) }),
              h("td", { class: "num", text: fmtNum(q.failed_total) }));
          })),
        h("h2", { text: "Live events" }),
        ctx.events.length
          ? h("ol", { class: "events" }, ctx.events.slice(0, 15).map((e) => h("li", {}, h("time", { text: fmtTime(e.at) }), " ", h("span", { class: "kind", text: e.kind }), " ", e.message)))
          : h("p", { class: "muted", text: "No events since sign-in." }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }

  load();
  const refresh = debounced(load, 500);
  const timer = setInterval(load, 5000);  // rates move without events
  return { onEvent: refresh, dispose: () => clearInterval(timer) };
}

function card(title, value, note, kind = "") {
  return h("div", { class: `card ${kind}` },
    h("h2", { text: title }),
    h("p", { class: "big", text: typeof value === "number" ? fmtNum(value) : value }),
    h("p", { class: "muted", text: note }));
}
