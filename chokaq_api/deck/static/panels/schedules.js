// Schedules: every recurring schedule with its next ticks, last run and the outcome of its newest job;
// pause / resume / run now (operator), create / change / delete (admin). A schedule declared in code is
// changed in the code: the console offers pause, resume and run now for it, not edit.

import { del, get, patch, post } from "../api.js";
import { confirmTyped, facts, field, fill, fmtNum, fmtTime, h, select, table, toast } from "../dom.js";
import { inspect } from "../inspector.js";
import { action, debounced, errorBox } from "./common.js";

const MISFIRE = [["once", "once: run the newest missed tick"], ["skip", "skip: run none"], ["catch_up", "catch_up: run the newest N"]];

// A tick in the schedule's own time zone, e.g. "Sat 05 Dec 02:30 CET" (the browser knows IANA zones).
export function inZone(iso, tz) {
  if (!iso) return "—";
  try {
    return new Intl.DateTimeFormat("en-GB", {
      timeZone: tz, weekday: "short", day: "2-digit", month: "short", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
    }).format(new Date(iso));
  } catch {
    return fmtTime(iso);
  }
}

function inSeconds(iso) {
  if (!iso) return "";
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (s <= 0) return "due";
  if (s < 120) return `in ${s} s`;
  if (s < 7200) return `in ${Math.round(s / 60)} min`;
  if (s < 172800) return `in ${Math.round(s / 3600)} h`;
  return `in ${Math.round(s / 86400)} d`;
}

export function outcome(value, reason) {
  if (!value) return h("span", { class: "muted", text: "never ran" });
  return h("span", { class: `outcome outcome-${value}`, text: reason ? `${value} (${reason})` : value });
}

export function render(section, ctx) {
  const state = { rows: [], open: null };
  const head = h("div", { class: "row" });
  const creator = h("div", { hidden: true });
  const list = h("div", { class: "list" });
  const aside = h("aside", { class: "inspector", "aria-labelledby": "schedule-title", hidden: true });
  section.append(
    h("p", { class: "muted", text: "A schedule enqueues one job of its type at every tick of its cron expression; every serve and worker process checks for due ticks, and each tick runs once however many do. Times are UTC; the schedule's own zone is shown beside them." }),
    head, creator, h("div", { class: "split" }, list, aside));
  fill(head, action(ctx, "schedule_edit", "New schedule", () => { creator.hidden = !creator.hidden; if (!creator.hidden) fill(creator, definitionForm(null)); }, { class: "primary" }));

  async function change(name, verb) {
    const path = `/schedules/${encodeURIComponent(name)}`;
    if (verb === "run") {
      const { data } = await post(`${path}/trigger`);
      toast(`${name}: job ${data.job_id} enqueued`);
    } else if (verb === "delete") {
      if (!(await confirmTyped({ title: `Delete schedule ${name}?`, body: "Its ticks stop and its run history is deleted (the jobs it made stay). A schedule declared in code comes back when a process that declares it starts.", word: name }))) return;
      await del(path);
      toast(`${name} deleted`);
      if (state.open === name) { state.open = null; aside.hidden = true; }
    } else {
      await post(`${path}/${verb}`);
      toast(`${name} ${verb}d`);
    }
    await load();
    if (state.open === name) await open(name);
  }

  function buttons(s) {
    return [
      action(ctx, "schedule_run", s.paused ? "Resume" : "Pause", () => change(s.name, s.paused ? "resume" : "pause"), { "aria-label": `${s.paused ? "Resume" : "Pause"} ${s.name}` }),
      action(ctx, "schedule_run", "Run now", () => change(s.name, "run"), { "aria-label": `Run ${s.name} now` }),
      action(ctx, "schedule_edit", "Delete", () => change(s.name, "delete"), { class: "danger", "aria-label": `Delete ${s.name}` }),
    ];
  }

  function definitionForm(s) {
    const input = (name, value, attrs = {}) => h("input", { name, value: value ?? "", ...attrs });
    const payload = h("textarea", { name: "payload", class: "code", rows: 3, spellcheck: "false", text: s ? (s.payload ?? "") : "{}" });
    const controls = [
      s ? null : field("Name", input("name", "", { required: true, placeholder: "reports.nightly" })),
      field("Job type", input("type", s && s.type, { required: true, placeholder: "report.v1" })),
      field("Cron", input("cron", s && s.cron, { required: true, placeholder: "*/5 * * * *", class: "mono" }), "5 fields, 6 with seconds first, or @daily"),
      field("Time zone", input("tz", s ? s.tz : "UTC")),
      field("Queue", input("queue", s ? s.queue : "default")),
      field("Priority", input("priority", s ? s.priority : 10, { type: "number", min: 0, class: "narrow" })),
      field("Misfire", select("misfire", MISFIRE, s ? s.misfire : "once")),
      field("Catch up N", input("catch_up_max", s ? s.catch_up_max : 1, { type: "number", min: 1, max: 1000, class: "narrow" })),
      field("Payload (JSON)", payload),
    ];
    const error = h("p", { class: "error", role: "alert" });
    const formEl = h("form", { class: "filters schedule-form", "aria-label": s ? `Change ${s.name}` : "New schedule", onsubmit: async (event) => {
      event.preventDefault();
      const body = {};
      for (const el of formEl.querySelectorAll("[name]")) body[el.name] = el.value.trim();
      for (const key of ["priority", "catch_up_max"]) body[key] = Number(body[key]);
      body.payload = body.payload === "" ? null : body.payload;
      error.textContent = "";
      try {
        if (s) {
          await patch(`/schedules/${encodeURIComponent(s.name)}`, body);
          toast(`${s.name} changed`);
          await open(s.name);
        } else {
          await post("/schedules", body);
          toast(`${body.name} created`);
          creator.hidden = true;
        }
        await load();
      } catch (e) {
        error.textContent = e.message;
      }
    } }, controls, h("button", { type: "submit", class: "primary", text: s ? "Save" : "Create" }), error);
    return formEl;
  }

  async function open(name) {
    state.open = name;
    aside.hidden = false;
    try {
      const [{ data: s }, { data: runs, pagination }] = await Promise.all([
        get(`/schedules/${encodeURIComponent(name)}`),
        get(`/schedules/${encodeURIComponent(name)}/runs`, { page_size: 20 }),
      ]);
      fill(aside,
        h("div", { class: "inspector-head" },
          h("h2", { id: "schedule-title", text: s.name }),
          h("button", { type: "button", class: "close", "aria-label": "Close the schedule", text: "×", onclick: () => { aside.hidden = true; state.open = null; } })),
        facts([
          ["Job type", s.type],
          ["Cron", h("code", { text: `${s.cron}  (${s.tz})` })],
          ["State", s.paused ? "paused" : "running"],
          ["Declared", s.source === "code" ? "in code (@job): change it there" : `over the API by ${s.created_by || "—"}`],
          ["Misfire", s.misfire === "catch_up" ? `catch_up ${s.catch_up_max}` : s.misfire],
          ["Grace", s.misfire_grace_seconds ? `${s.misfire_grace_seconds} s` : "Schedules.MisfireGrace"],
          ["Queue · priority", `${s.queue} · ${s.priority}`],
          ["Payload", s.payload ? h("code", { text: s.payload }) : "{}"],
          ["Runs", `${fmtNum(s.runs_total)} enqueued · ${fmtNum(s.missed_total)} missed`],
        ]),
        h("h3", { text: "Next ticks" }),
        s.next_runs.length
          ? h("ol", { class: "ticks", "data-testid": "next-runs" }, s.next_runs.map((t) => h("li", {}, h("time", { text: fmtTime(t) }), " ", h("span", { class: "muted", text: inZone(t, s.tz) }))))
          : h("p", { class: "muted", text: "None while paused." }),
        h("div", { class: "row" }, buttons(s)),
        s.source === "api" && ctx.can("schedule_edit") ? h("details", {}, h("summary", { text: "Change" }), definitionForm(s)) : null,
        h("h3", { text: `Runs (${fmtNum(pagination ? pagination.total : runs.length)})` }),
        runs.length
          ? table(`Runs of ${s.name}`, ["Tick (UTC)", "Kind", "Job", "Outcome"], runs.map((r) => h("tr", {},
            h("td", { class: "time", text: fmtTime(r.tick_at) }),
            h("td", { text: r.kind === "manual" ? `run now by ${r.fired_by}` : r.late ? "late (misfire)" : "tick" }),
            h("td", {}, r.job_id ? h("button", { type: "button", class: "link mono", "aria-label": `Inspect ${r.job_id}`, onclick: () => { state.open = null; inspect(aside, ctx, r.job_id); }, text: r.job_id }) : "—"),
            h("td", {}, outcome(r.outcome, r.failure_reason)))), { "data-testid": "schedule-runs" })
          : h("p", { class: "muted", text: "No runs yet." }));
    } catch (error) {
      fill(aside, errorBox(error));
    }
  }

  async function load() {
    try {
      const { data } = await get("/schedules", { page_size: 1000 });
      state.rows = data;
      fill(list, data.length
        ? table("Schedules", ["Schedule", "Job type", "When", "State", "Next run (UTC)", "Last run (UTC)", "Last outcome", "Runs", "Actions"],
          data.map((s) => h("tr", { "data-schedule": s.name, class: state.open === s.name ? "open" : null },
            h("td", {}, h("button", { type: "button", class: "link", "aria-label": `Show schedule ${s.name}`, onclick: () => open(s.name), text: s.name }),
              s.source === "code" ? h("span", { class: "badge", title: "declared in code (@job)", text: "code" }) : null),
            h("td", { text: s.type }),
            h("td", {}, h("code", { text: s.cron }), h("div", { class: "muted", text: s.tz })),
            h("td", { text: s.paused ? "paused" : "running" }),
            h("td", { class: "time", "data-testid": "next-run" }, s.next_run_at ? [fmtTime(s.next_run_at), h("div", { class: "muted", text: `${inSeconds(s.next_run_at)} · ${inZone(s.next_run_at, s.tz)}` })] : "—"),
            h("td", { class: "time", text: fmtTime(s.last_run_at) }),
            h("td", { "data-testid": "last-outcome" }, outcome(s.last_outcome, s.last_failure_reason)),
            h("td", { class: "num", title: `${s.missed_total} missed`, text: fmtNum(s.runs_total) }),
            h("td", { class: "actions" }, buttons(s)))))
        : h("p", { class: "muted", text: "No schedules yet. Declare one in code (@job(schedule=\"*/5 * * * *\")), or create one here or with `chokaq schedules add`." }));
    } catch (error) {
      fill(list, errorBox(error));
    }
  }

  load();
  const refresh = debounced(load, 500);
  const timer = setInterval(load, 5000);  // next and last runs move without events
  return { onEvent: (e) => { if (e.kind === "schedule") refresh(); }, dispose: () => clearInterval(timer) };
}
