// The horizon banner: while a database session holds back vacuum for longer than Health.HorizonDegraded
// (docs/endurance.md), every panel shows who it is. Admins get "End this session…" (typed pid to confirm;
// POST /horizon/cancel cancels, then ends it; audited). Everyone else sees the facts without the button.

import { get, post } from "./api.js";
import { $, confirmTyped, fill, fmtSeconds, h, toast } from "./dom.js";

const EVERY_MS = 10000;

function held(report) {
  const limit = report.degraded_after_seconds;
  if (report.wal) return report.wal.pinned_seconds >= limit ? "wal" : null;
  if (report.replication_slots.some((s) => !s.active)) return "slot";
  const s = report.oldest_snapshot;
  if (s && s.transaction_age_seconds >= limit) return "session";
  if (report.held_seconds >= limit) return "prepared";
  return null;
}

function describe(kind, report) {
  if (kind === "wal") {
    const mb = (report.wal.size_bytes || 0) / 1048576;
    return [`A reader has pinned the SQLite write-ahead log for ${fmtSeconds(report.wal.pinned_seconds)} (${mb.toFixed(0)} MB). `,
      "It is cut back once that read transaction ends."];
  }
  if (kind === "slot") {
    const names = report.replication_slots.filter((s) => !s.active).map((s) => s.slot_name).join(", ");
    return [`Inactive replication slot(s) ${names} hold back vacuum. Drop them if no standby needs them.`];
  }
  if (kind === "prepared") {
    return [`A prepared transaction has held back vacuum for ${fmtSeconds(report.held_seconds)}. Commit or roll it back.`];
  }
  const s = report.oldest_snapshot;
  return [
    `A database session has held a snapshot for ${fmtSeconds(s.transaction_age_seconds)}: `,
    h("strong", { text: `pid ${s.pid}` }),
    `, application ${s.application || "—"}, user ${s.user || "—"}, from ${s.client || "local"}, ${s.state || "—"}. `,
    "Vacuum cannot clean the queue tables until it ends; the queue keeps its speed meanwhile. ",
    h("code", { class: "horizon-query", text: s.query || "" }),
  ];
}

async function endSession(ctx, pid) {
  const ok = await confirmTyped({
    title: `End database session ${pid}?`,
    body: "Its running statement is cancelled; if it still holds a snapshot two seconds later (a notebook idle in a transaction), the session is ended and its open transaction rolls back. This is audited.",
    word: String(pid),
  });
  if (!ok) return;
  try {
    const { data } = await post("/horizon/cancel", { pid, confirm: pid, reason: `The Deck, ${ctx.me.name}` });
    toast(data.released ? `Session ${pid} released its snapshot (${data.signals.join(", then ")}).` : `Session ${pid} still holds a snapshot.`, data.released ? "info" : "error");
  } catch (error) {
    toast(`Cannot end session ${pid}: ${error.message}`, "error");
  }
}

export function startBanner(ctx) {
  const el = $("#horizon");
  let timer = null;
  let stopped = false;
  async function load() {
    try {
      const { data } = await get("/horizon");
      const kind = held(data);
      if (!kind) {
        el.hidden = true;
      } else {
        const button = kind === "session" && ctx.can("end_sessions")
          ? h("button", { type: "button", class: "danger", text: "End this session…", onclick: () => endSession(ctx, data.oldest_snapshot.pid).then(load) })
          : null;
        fill(el, h("span", { class: "horizon-facts" }, describe(kind, data)), button);
        el.hidden = false;
      }
    } catch {
      // The banner is advice; a failing read leaves it as it was.
    }
    if (!stopped) timer = setTimeout(load, EVERY_MS);
  }
  load();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      el.hidden = true;
    },
  };
}
