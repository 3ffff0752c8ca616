// Bulk plans: a selection or a filter becomes a frozen plan (a dry run with counts by reason / queue /
// type and a sample), then runs chunk by chunk (each one transaction of at most 1000 jobs) with a
// progress bar, an optional canary (stop after the first chunk to look at its outcomes) and a rate
// limit, after a typed confirmation when large, and after a second person's approval when the server
// requires it (Api.PlanApprovalMinJobs).

import { get, post } from "../api.js";
import { fill, confirmTyped, facts, field, fmtNum, fmtTime, h, select, table, toast } from "../dom.js";
import { action, errorBox } from "./common.js";

// Bulk resurrects of more jobs than this ask for a typed confirmation; purges always do.
export const LARGE_BULK = 1000;

export function render(section, ctx, params = {}) {
  const top = h("div");
  const detail = h("div", { class: "plan-detail" });
  const listBox = h("div");
  section.append(top, detail, h("h2", { text: "Recent plans" }), listBox);
  let running = null;

  async function loadList() {
    try {
      const { data } = await get("/plans", { page_size: 20 });
      fill(listBox, data.length
        ? table("Recent plans", ["Plan", "Action", "State", "Jobs", "Done", "By", "Created"], data.map((p) => h("tr", {},
          h("td", {}, h("button", { type: "button", class: "link mono", onclick: () => showPlan(p.id), text: p.id, "aria-label": `Open plan ${p.id}` })),
          h("td", { text: p.action }), h("td", { text: p.state }), h("td", { class: "num", text: fmtNum(p.total) }),
          h("td", { class: "num", text: fmtNum(p.done) }), h("td", { text: p.actor }), h("td", { text: fmtTime(p.created_at) }))))
        : h("p", { class: "muted", text: "No plans yet. Select dead jobs (or set a filter) in the DLQ panel and plan a resurrect or purge." }));
    } catch (error) {
      fill(listBox, errorBox(error));
    }
  }

  async function create(spec) {
    fill(detail, h("p", { class: "muted", text: "Freezing the plan…" }));
    try {
      const { data } = await post("/plans", spec);
      showPlan(data.id, data);
      loadList();
    } catch (error) {
      fill(detail, errorBox(error));
    }
  }

  function breakdown(title, counts) {
    const entries = Object.entries(counts || {}).sort((a, b) => b[1] - a[1]);
    if (!entries.length) return null;
    return h("div", { class: "breakdown" }, h("h3", { text: title }),
      h("ul", {}, entries.map(([k, n]) => h("li", {}, h("span", { text: k }), " ", h("strong", { text: fmtNum(n) })))));
  }

  async function showPlan(id, given) {
    const plan = given || (await get(`/plans/${encodeURIComponent(id)}`)).data;
    const progress = h("progress", { max: Math.max(1, plan.total), value: plan.done + plan.skipped, "aria-label": "Plan progress", id: "plan-progress" });
    const progressText = h("p", { "data-testid": "plan-progress-text", role: "status", "aria-live": "polite" });
    const canary = h("input", { type: "checkbox", id: "plan-canary" });
    const rate = h("input", { type: "number", id: "plan-rate", min: 0.1, step: 0.1, placeholder: "no limit", class: "narrow" });
    const outcome = h("div");
    const setProgress = (p) => {
      progress.max = Math.max(1, p.total);
      progress.value = p.done + p.skipped;
      progressText.textContent = `${p.state}: ${fmtNum(p.done)} done, ${fmtNum(p.skipped)} skipped of ${fmtNum(p.total)} · chunk ${fmtNum(p.chunks_done)} of ${fmtNum(p.chunks)}`;
    };
    setProgress(plan);
    const isMine = ctx.me && plan.actor === ctx.me.name;
    const finished = plan.state === "done" || plan.state === "discarded";

    async function execute() {
      const word = plan.action === "purge" ? `purge ${plan.total}` : `${plan.action} ${plan.total}`;
      if (plan.action === "purge" || plan.total > LARGE_BULK) {
        const ok = await confirmTyped({ title: `${plan.action} ${fmtNum(plan.total)} jobs?`, body: `Plan ${plan.id} will ${plan.action} ${fmtNum(plan.total)} jobs in chunks of ${plan.chunk_size}.${plan.action === "purge" ? " Purged jobs are gone for good." : ""}`, word });
        if (!ok) return;
      }
      const perSecond = Number(rate.value) || 0;
      running = { stop: false };
      const mine = running;
      let p = plan;
      let chunks = 0;
      while (!mine.stop) {
        const t0 = performance.now();
        const { data } = await post(`/plans/${encodeURIComponent(plan.id)}/execute`, { max_chunks: 1 });
        p = data;
        chunks += data.executed.length;
        setProgress(p);
        if (!data.executed.length || p.state === "done") break;
        if (canary.checked && chunks === 1) {
          toast("Canary chunk done: check its outcomes, then continue");
          await showOutcomes();
          break;
        }
        if (perSecond > 0) {
          const wait = 1000 / perSecond - (performance.now() - t0);
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
      }
      if (p.state === "done") toast(`Plan ${p.id} finished: ${fmtNum(p.done)} jobs, ${fmtNum(p.skipped)} skipped`);
      running = null;
      loadList();
      showPlan(p.id, p);
    }

    async function showOutcomes() {
      if (plan.action !== "resurrect") return;
      const { data: o } = await get(`/plans/${encodeURIComponent(plan.id)}/outcomes`);
      fill(outcome, h("h3", { text: "Where the resurrected jobs are now" }), facts([
        ["Acted on", fmtNum(o.acted)], ["Waiting", fmtNum(o.waiting)], ["Running", fmtNum(o.running)],
        ["Succeeded", fmtNum(o.succeeded)], ["Failed again", fmtNum(o.failed)],
        ["Failure rate", o.failure_rate === null ? "—" : `${fmtNum(o.failure_rate * 100, 1)} %`],
      ]));
    }

    const approvalNeeded = !plan.approved_by && !finished;
    fill(detail, 
      h("h2", {}, "Plan ", h("span", { class: "mono", text: plan.id })),
      facts([
        ["Action", plan.action], ["State", plan.state], ["Jobs frozen", fmtNum(plan.total)], ["Chunk size", plan.chunk_size],
        ["Created by", `${plan.actor} at ${fmtTime(plan.created_at)}`],
        ["Approved by", plan.approved_by ? `${plan.approved_by} at ${fmtTime(plan.approved_at)}` : "—"],
        ["Filter", plan.filter ? JSON.stringify(plan.filter) : "selected ids"],
        ...(plan.action === "resurrect" ? [["Retry budget", plan.renew === false ? "kept: the lifetime clock runs from each job's creation" : "renewed: attempts and Retry.MaxJobAge restart at the resurrect"]] : []),
        ...(plan.label ? [["Label", plan.label]] : []),
        ...(plan.rate ? [["Pace", `${fmtNum(plan.rate)} jobs/s (the plan's, for every process working it)`]] : []),
      ]),
      h("div", { class: "breakdowns" }, breakdown("By reason", plan.by_reason), breakdown("By queue", plan.by_queue), breakdown("By type", plan.by_type)),
      plan.sample && plan.sample.length ? h("details", {}, h("summary", { text: `Sample (${plan.sample.length})` }),
        h("ul", { class: "sample" }, plan.sample.map((s) => h("li", { class: "mono", text: `${s.id} · ${s.queue ?? ""} · ${s.type ?? ""} · ${s.failure_reason ?? s.status ?? ""}` })))) : null,
      progress, progressText,
      finished ? null : h("div", { class: "row options" },
        h("div", { class: "field inline" }, canary, h("label", { for: "plan-canary", text: "Canary: stop after the first chunk" })),
        field("Rate (chunks per second)", rate)),
      finished ? null : h("div", { class: "row" },
        action(ctx, plan.action === "purge" ? "purge" : "plan", plan.chunks_done ? "Continue" : "Execute", execute, { class: plan.action === "purge" ? "danger" : "primary", id: "plan-execute" }),
        action(ctx, "plan", "Stop", () => { if (running) running.stop = true; }),
        approvalNeeded && !isMine ? action(ctx, plan.action === "purge" ? "purge" : "plan", "Approve", async () => { await post(`/plans/${encodeURIComponent(plan.id)}/approve`); toast("Approved"); showPlan(plan.id); }) : null,
        action(ctx, plan.action === "purge" ? "purge" : "plan", "Discard", async () => { await post(`/plans/${encodeURIComponent(plan.id)}/discard`); toast("Discarded"); showPlan(plan.id); loadList(); })),
      approvalNeeded && isMine ? h("p", { class: "muted", text: "If the server requires four-eyes approval for a plan this size, another token must approve it before it runs." }) : null,
      outcome);
    if (plan.action === "resurrect" && plan.chunks_done) showOutcomes().catch(() => {});
  }

  if (params.create) {
    const spec = params.create;
    const chunk = h("input", { type: "number", id: "plan-chunk", min: 1, max: 1000, value: 1000, class: "narrow" });
    const limit = h("input", { type: "number", id: "plan-max", min: 1, placeholder: "all", class: "narrow" });
    const kind = select("action", [["resurrect", "resurrect"], ...(ctx.can("purge") ? [["purge", "purge"]] : [])], spec.action);
    // A resurrect renews the jobs' retry budget unless told to keep it; keeping it is previewed at once:
    // jobs older than Retry.MaxJobAge would die on their first failure (docs/worker.md).
    const keep = h("input", { type: "checkbox", id: "plan-keep-budget" });
    const budget = h("p", { role: "status", "data-testid": "budget-warning", class: "lag-warning" });
    const selection = () => (spec.ids ? { ids: spec.ids } : { filter: spec.filter });
    async function checkBudget() {
      budget.textContent = "";
      if (kind.value !== "resurrect" || !keep.checked) return;
      try {
        const { data } = await post("/dlq/preview", { ...selection(), renew: false, sample: 0, ...(limit.value ? { max_jobs: Number(limit.value) } : {}) });
        budget.textContent = (data.warnings || []).join(" ") || "No job is older than Retry.MaxJobAge: keeping the budget costs none of them a retry.";
      } catch (error) {
        budget.textContent = error.message;
      }
    }
    keep.addEventListener("change", checkBudget);
    kind.addEventListener("change", checkBudget);
    fill(top, h("form", { class: "filters", "aria-label": "New plan", onsubmit: (e) => { e.preventDefault(); } },
      h("p", { text: spec.ids ? `${fmtNum(spec.ids.length)} selected jobs` : `Every dead job matching ${JSON.stringify(spec.filter)}` }),
      field("Action", kind), field("Jobs per chunk", chunk), field("At most", limit),
      h("div", { class: "field inline" }, keep, h("label", { for: "plan-keep-budget", text: "Resurrect: keep the old retry budget (do not renew)" })),
      budget,
      action(ctx, "plan", "Preview plan", () => create({
        action: kind.value, ...selection(), chunk_size: Number(chunk.value) || 1000,
        ...(limit.value ? { max_jobs: Number(limit.value) } : {}),
        ...(kind.value === "resurrect" ? { renew: !keep.checked } : {}),
      }), { class: "primary" })));
  } else if (params.plan) {
    showPlan(params.plan).catch((error) => fill(detail, errorBox(error)));
  }
  loadList();
  return { dispose: () => { if (running) running.stop = true; } };
}
