// The schedules view: every schedule (GET /api/schedules) with its timing, next run and
// state, and buttons to pause, resume and delete it. Drawn with textContent only. The module
// wires its own toggle, so the page needs only its markup and one import.
import { api } from "./api.js";
import { $, showError } from "./state.js";

const panel = $("schedules-view");

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function timing(s) {
  return s.cron ? `cron ${s.cron} (${s.timezone})` : `every ${s.interval} s`;
}

function action(label, s, run) {
  const button = el("button", "ghost", label);
  button.type = "button";
  button.dataset.action = label.toLowerCase();
  button.setAttribute("aria-label", `${label} schedule ${s.name || s.id}`);
  button.addEventListener("click", () => run().then(refresh).catch(showError));
  return button;
}

function row(s) {
  const li = el("li", "schedule");
  li.dataset.schedule = s.id;
  const base = `/schedules/${encodeURIComponent(s.id)}`;
  li.append(el("strong", null, s.name || s.id), el("span", "runtime-muted",
    ` · ${s.agent} · ${timing(s)} · ${s.paused ? "paused" : `next ${new Date(s.nextRun).toLocaleString()}`}`));
  const buttons = el("div", "schedule-actions");
  buttons.append(s.paused ? action("Resume", s, () => api(`${base}/resume`, { method: "POST" }))
    : action("Pause", s, () => api(`${base}/pause`, { method: "POST" })));
  if (s.source !== "project") buttons.append(action("Delete", s, () => api(base, { method: "DELETE" })));
  li.append(buttons);
  return li;
}

export async function refresh() {
  const { schedules } = await api("/schedules");
  const list = el("ul", "schedules");
  schedules.forEach((s) => list.appendChild(row(s)));
  if (!schedules.length) list.appendChild(el("li", "runtime-empty", "no schedule: POST /api/schedules or define_schedule"));
  $("schedules-list").replaceChildren(list);
}

export function toggle(open = panel.hidden) {
  panel.hidden = !open;
  $("schedules-toggle").setAttribute("aria-pressed", String(open));
  if (open) refresh().catch(showError);
}

$("schedules-toggle").addEventListener("click", () => toggle());
$("schedules-close").addEventListener("click", () => toggle(false));
$("schedules-refresh").addEventListener("click", () => refresh().catch(showError));
