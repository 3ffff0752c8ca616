// The Inspector: every field of a job, the full error details, zombie evidence, the payload editor
// (validated as you type, pointing at the error) with Save / Save & Resurrect, and the job's audit trail.

import { get, patch, post } from "./api.js";
import { clear, fill, confirmTyped, facts, fmtNum, fmtSeconds, fmtTime, h, toast } from "./dom.js";
import { checkJson } from "./jsoncheck.js";
import { action, errorBox } from "./panels/common.js";

// Shows job `id` in `aside`; `onChange()` runs after the job was saved, resurrected or purged. `dead`:
// the job is expected in the DLQ, whose route adds the zombie evidence (runtime, heartbeat age).
export async function inspect(aside, ctx, id, opts = {}) {
  const { onChange = () => {}, onSelectGroup, dead = false } = opts;
  const started = performance.now();
  fill(aside, h("p", { class: "muted", text: `Loading ${id}…` }));
  aside.hidden = false;
  let job;
  let trail;
  try {
    const path = encodeURIComponent(id);
    const [one, history] = await Promise.all([
      get(dead ? `/dlq/${path}` : `/jobs/${path}`).catch((error) => {
        if (dead && error.status === 404) return get(`/jobs/${path}`);  // it left the DLQ meanwhile
        throw error;
      }),
      get("/audit", { job_id: id, page_size: 50 }),
    ]);
    job = one.data;
    trail = history.data;
  } catch (error) {
    fill(aside, errorBox(error));
    return;
  }
  fill(aside, 
    h("div", { class: "inspector-head" },
      h("h2", { id: "inspector-title", text: "Inspector" }),
      h("button", { type: "button", class: "close", "aria-label": "Close the Inspector", text: "×", onclick: () => { aside.hidden = true; } })),
    h("p", { class: "job-id", "data-testid": "inspector-id", text: job.id }),
    facts([
      ["Job ID", job.id],
      ["Type", job.type],
      ["Queue", job.queue],
      ["Location", `${job.location} (${job.status})`],
      ["Failure Reason", job.failure_reason ? h("span", { class: `reason reason-${job.failure_reason}`, text: job.failure_reason }) : null],
      ["Attempts", job.attempt_count],
      ["Failed At", fmtTime(job.failed_at)],
      ["Worker ID", job.worker_id],
      ["Priority", job.priority],
      ["Created", `${fmtTime(job.created_at)} by ${job.created_by || "—"}`],
      ["Started", fmtTime(job.started_at)],
      ["Finished", fmtTime(job.finished_at)],
      ["Last modified by", job.last_modified_by],
      ["Idempotency key", job.idempotency_key],
      ["Error group", job.fingerprint ? groupLink(job, onSelectGroup) : null],
    ]),
    evidence(job),
    job.error_details || job.last_error
      ? h("section", { "aria-labelledby": "errors-title" },
        h("h3", { id: "errors-title", text: job.error_details ? "Error details" : "Last error" }),
        h("pre", { class: "trace", tabindex: "0", "data-testid": "error-details", "aria-label": "Error details", text: job.error_details || job.last_error }))
      : null,
    editor(job, ctx, aside, opts),
    history(trail));
  aside.onkeydown = (event) => { if (event.key === "Escape") aside.hidden = true; };
  aside.dataset.renderedMs = String(Math.round(performance.now() - started));
  aside.querySelector("h2").focus?.();
}

function groupLink(job, onSelectGroup) {
  if (!onSelectGroup) return job.fingerprint;
  return h("button", { type: "button", class: "link", title: "Filter the DLQ by this error group", onclick: () => onSelectGroup(job.fingerprint), text: job.fingerprint });
}

function evidence(job) {
  const zombie = job.failure_reason === "Zombie" || job.failure_reason === "HeartbeatFailure";
  if (!zombie && job.runtime_seconds == null && !job.heartbeat_at) return null;
  return h("section", { class: zombie ? "evidence zombie" : "evidence", "aria-labelledby": "evidence-title" },
    h("h3", { id: "evidence-title", text: zombie ? "Zombie evidence" : "Run" }),
    facts([
      ["Last heartbeat", fmtTime(job.heartbeat_at)],
      ["Silent before it died", fmtSeconds(job.heartbeat_age_seconds)],
      ["Runtime", fmtSeconds(job.runtime_seconds)],
      ["Worker", job.worker_id],
    ]),
    zombie ? h("p", { class: "muted", text: "Its worker stopped beating while the handler ran: the handler may have had side effects. Resurrect only if the job is idempotent." }) : null);
}

function editor(job, ctx, aside, opts) {
  const { onChange = () => {} } = opts;
  const isDead = job.location === "dlq";
  const editable = isDead && ctx.can("edit");
  const text = job.payload ?? "";
  const area = h("textarea", {
    id: "payload-editor", class: "code", spellcheck: "false", rows: Math.min(18, Math.max(6, text.split("\n").length + 1)),
    "aria-describedby": "payload-status", readonly: !editable, value: text,
  });
  const status = h("p", { id: "payload-status", class: "json-status", role: "status", "aria-live": "polite" });
  const tags = h("input", { id: "tags-editor", value: job.tags ?? "", readonly: !editable, spellcheck: "false" });
  const priority = h("input", { id: "priority-editor", type: "number", min: -1000, max: 1000, placeholder: "10 (default)", class: "narrow" });
  let current = { ok: true };
  let goTo = null;

  function validate() {
    current = checkJson(area.value);
    area.setAttribute("aria-invalid", String(!current.ok));
    clear(status);
    if (current.ok) {
      status.className = "json-status ok";
      status.append("Valid JSON");
    } else {
      const { line, column, message } = current.error;
      status.className = "json-status bad";
      goTo = h("button", { type: "button", class: "link", text: `Line ${line}, column ${column}`, onclick: () => { area.focus(); area.setSelectionRange(current.error.offset, current.error.offset); } });
      status.append(goTo, `: ${message}`);
    }
    for (const b of aside.querySelectorAll("[data-needs-valid]")) b.disabled = !current.ok;
  }
  area.addEventListener("input", validate);

  const changes = () => {
    const body = {};
    if (area.value !== text) body.payload = area.value;
    if (tags.value !== (job.tags ?? "")) body.tags = tags.value;
    return body;
  };
  async function save() {
    const body = changes();
    if (!Object.keys(body).length) { toast("Nothing changed"); return false; }
    await patch(`/dlq/${encodeURIComponent(job.id)}`, body);
    return true;
  }
  async function saveAndResurrect() {
    // Two audited steps, so the trail shows the edit and then the resurrection; if the second fails,
    // the job stays in the DLQ with the saved fix.
    await save();
    const body = {};
    if (priority.value.trim() !== "") body.priority = Number(priority.value);
    const { data } = await post(`/dlq/${encodeURIComponent(job.id)}/resurrect`, body);
    toast(`${job.id} resurrected into ${data.queue} (priority ${data.priority})`);
    onChange();
    await inspect(aside, ctx, job.id, { ...opts, dead: false });
  }
  async function purge() {
    const ok = await confirmTyped({ title: "Purge this dead job?", body: `Job ${job.id} will be deleted for good. This cannot be undone.`, word: "purge" });
    if (!ok) return;
    await post("/dlq/purge", { ids: [job.id] });
    toast(`${job.id} purged`);
    aside.hidden = true;
    onChange();
  }

  const section = h("section", { class: "editor", "aria-labelledby": "payload-title" },
    h("h3", { id: "payload-title" }, h("label", { for: "payload-editor", text: editable ? "Payload (editable JSON)" : "Payload" })),
    area, status,
    h("div", { class: "field" }, h("label", { for: "tags-editor", text: "Tags" }), tags, h("small", { text: "Comma-separated" })),
    isDead && ctx.can("resurrect") ? h("div", { class: "field" }, h("label", { for: "priority-editor", text: "Priority after resurrection" }), priority) : null,
    isDead ? h("div", { class: "row" },
      action(ctx, "edit", "Save", async () => { if (await save()) { toast(`${job.id} saved`); onChange(); await inspect(aside, ctx, job.id, opts); } }, { "data-needs-valid": "" }),
      action(ctx, "resurrect", "Save & Resurrect", saveAndResurrect, { "data-needs-valid": "", class: "primary" }),
      action(ctx, "purge", "Purge…", purge, { class: "danger" })) : null);
  queueMicrotask(validate);
  return section;
}

function history(trail) {
  return h("section", { "aria-labelledby": "history-title" },
    h("h3", { id: "history-title", text: "Audit history" }),
    trail.length
      ? h("ol", { class: "trail", "data-testid": "job-audit" }, trail.map((a) => h("li", {},
        h("time", { text: fmtTime(a.at) }), " ",
        h("strong", { class: "action", text: a.action }), " by ",
        h("span", { class: "actor", text: a.actor }),
        a.plan_id ? ` (plan ${a.plan_id})` : "",
        a.count > 1 ? ` · ${fmtNum(a.count)} jobs` : "",
        beforeAfter(a.details))))
      : h("p", { class: "muted", text: "No audit entries for this job." }));
}

// Edits carry {before, after} objects (payload, tags, priority ...): show each changed field's old and new
// value side by side, a payload pretty-printed when it is valid JSON and verbatim when it is not.
export function beforeAfter(details) {
  if (!details || typeof details !== "object") return null;
  if (!("before" in details || "after" in details)) {
    return h("details", {}, h("summary", { text: "Details" }), h("pre", { class: "code", text: JSON.stringify(details, null, 2) }));
  }
  const before = details.before || {};
  const after = details.after || {};
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  const changed = keys.filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  return h("div", { class: "diff" },
    h("h4", { text: "Before" }), h("h4", { text: "After" }),
    changed.map((k) => [
      h("div", {}, h("span", { class: "key", text: k }), h("pre", { class: "code", "data-side": "before", text: shown(before[k]) })),
      h("div", {}, h("span", { class: "key", text: k }), h("pre", { class: "code", "data-side": "after", text: shown(after[k]) })),
    ]),
    changed.length ? null : h("p", { class: "muted", text: "No field changed." }));
}

function shown(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "string") return JSON.stringify(value, null, 2);
  try {
    const parsed = JSON.parse(value);
    return typeof parsed === "object" && parsed !== null ? JSON.stringify(parsed, null, 2) : value;
  } catch {
    return value;
  }
}
