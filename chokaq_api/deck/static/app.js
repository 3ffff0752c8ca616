// The Deck: sign-in, the panel navigation and the live stream. Each panel is a module in panels/ with
// `render(root, ctx, params)` returning an optional { onEvent(event), dispose() }.

import { ApiError, get, hooks, session } from "./api.js";
import { $, clear, fill, h, toast } from "./dom.js";
import { startBanner } from "./horizon.js";
import { follow } from "./live.js";
import * as audit from "./panels/audit.js";
import * as dlq from "./panels/dlq.js";
import * as groups from "./panels/groups.js";
import * as jobs from "./panels/jobs.js";
import * as overview from "./panels/overview.js";
import * as plans from "./panels/plans.js";
import * as queues from "./panels/queues.js";
import * as schedules from "./panels/schedules.js";
import * as workers from "./panels/workers.js";

const PANELS = [
  ["overview", "Overview", overview],
  ["queues", "Queues", queues],
  ["workers", "Workers", workers],
  ["schedules", "Schedules", schedules],
  ["jobs", "Jobs", jobs],
  ["dlq", "DLQ", dlq],
  ["groups", "Error groups", groups],
  ["plans", "Bulk plans", plans],
  ["audit", "Audit", audit],
];

const root = document.documentElement.dataset;
const ctx = {
  me: null,
  lag: { warning: Number(root.lagWarning || 5), critical: Number(root.lagCritical || 10) },
  can(ability) { return Boolean(ctx.me && ctx.me.can.includes(ability)); },
  navigate(name, params = {}) { show(name, params); },
  events: [],
};

let current = null;
let stream = null;
let banner = null;

function setLive(state) {
  const el = $("#live");
  el.hidden = false;
  el.dataset.state = state;
  el.textContent = { live: "● live", reconnecting: "○ reconnecting…", off: "○ offline" }[state] || state;
}

function onEvent(event) {
  ctx.events.unshift(event);
  ctx.events.length = Math.min(ctx.events.length, 50);
  if (current && current.handle && current.handle.onEvent) current.handle.onEvent(event);
}

function show(name, params = {}) {
  const entry = PANELS.find(([n]) => n === name) || PANELS[0];
  if (current && current.handle && current.handle.dispose) current.handle.dispose();
  for (const button of $("#nav").querySelectorAll("button")) {
    if (button.dataset.panel === entry[0]) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  const view = clear($("#view"));
  const section = h("section", { class: `panel panel-${entry[0]}`, "aria-labelledby": `title-${entry[0]}` },
    h("h1", { id: `title-${entry[0]}`, text: entry[1] }));
  view.append(section);
  current = { name: entry[0], handle: null };
  if (location.hash !== `#/${entry[0]}`) history.replaceState(null, "", `#/${entry[0]}`);
  const handle = entry[2].render(section, ctx, params);
  current.handle = handle || null;
}

async function signIn(token) {
  const { data } = await get("/whoami", undefined, { token });
  session.token = token;
  ctx.me = data;
  $("#signin").hidden = true;
  $("#view").hidden = false;
  const nav = clear($("#nav"));
  nav.hidden = false;
  for (const [name, label] of PANELS) {
    nav.append(h("button", { type: "button", "data-panel": name, text: label, onclick: () => show(name) }));
  }
  const who = $("#who");
  who.hidden = false;
  fill(who, h("span", { class: "who-name", text: data.name }), " ", h("span", { class: `role role-${data.role}`, text: data.role }));
  $("#signout").hidden = false;
  stream = follow({ onEvent, onState: setLive });
  banner = startBanner(ctx);
  const wanted = location.hash.replace(/^#\//, "");
  show(PANELS.some(([n]) => n === wanted) ? wanted : "overview");
}

function signOut(message) {
  session.token = null;
  ctx.me = null;
  if (stream) stream.stop();
  stream = null;
  if (banner) banner.stop();
  banner = null;
  if (current && current.handle && current.handle.dispose) current.handle.dispose();
  current = null;
  clear($("#view")).hidden = true;
  clear($("#nav")).hidden = true;
  $("#who").hidden = true;
  $("#live").hidden = true;
  $("#signout").hidden = true;
  $("#signin").hidden = false;
  $("#token").value = "";
  $("#signin-error").textContent = message || "";
  $("#token").focus();
}

hooks.unauthorized = (error) => signOut(`Signed out: ${error.message}`);

$("#signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("#token").value.trim();
  $("#signin-error").textContent = "";
  try {
    await signIn(token);
  } catch (error) {
    $("#signin-error").textContent = error instanceof ApiError ? `Sign-in refused: ${error.message}` : `Cannot reach the API: ${error.message}`;
  }
});
$("#signout").addEventListener("click", () => signOut("Signed out."));
window.addEventListener("hashchange", () => {
  const wanted = location.hash.replace(/^#\//, "");
  if (ctx.me && current && wanted !== current.name && PANELS.some(([n]) => n === wanted)) show(wanted);
});
window.addEventListener("unhandledrejection", (event) => {
  if (event.reason instanceof ApiError) toast(event.reason.message, "error");
});

if (session.token) {
  signIn(session.token).catch((error) => signOut(error instanceof ApiError ? `Signed out: ${error.message}` : ""));
} else {
  signOut("");
}
