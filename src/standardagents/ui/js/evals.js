// The evals view: stored experiments (GET /api/evals/runs), a run's table of cases, two runs
// side by side, a case's thread opened in the inspector, and capturing the open thread's
// latest turn as an eval case (POST /api/evals/capture). Drawn with textContent only.
import { api } from "./api.js";
import { $, showError, state } from "./state.js";

const panel = $("evals-view");
let openThread = async () => {};
let chosen = [];

export function onOpenThread(fn) { openThread = fn; }

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function when(ms) { return new Date(ms).toLocaleString(); }

function scoresText(scores) {
  return scores.map((s) => `${s.name}=${Number(s.score).toFixed(2)}`).join(" ");
}

function reasonText(c) {
  return c.error || c.scores.filter((s) => !s.passed).map((s) => `${s.name}: ${s.reason}`).join("; ");
}

function caseKey(c) { return `${c.dataset}/${c.name}${c.repeat ? ` #${c.repeat + 1}` : ""}`; }

function runRow(run) {
  const li = el("li", "evals-run");
  li.dataset.run = run.id;
  const pick = el("input");
  pick.type = "checkbox";
  pick.checked = chosen.includes(run.id);
  pick.setAttribute("aria-label", `Compare run ${run.label || run.id}`);
  pick.addEventListener("change", () => {
    chosen = pick.checked ? [...chosen.filter((id) => id !== run.id), run.id].slice(-2) : chosen.filter((id) => id !== run.id);
    refresh().catch(showError);
  });
  const open = el("button", "link evals-open", `${run.label || run.id}`);
  open.type = "button";
  open.addEventListener("click", () => showRun(run.id).catch(showError));
  li.append(pick, open, el("span", "runtime-muted",
    ` · ${run.passed} passed, ${run.failed} failed · ${when(run.startedAt)}`));
  return li;
}

function caseRow(c) {
  const tr = el("tr", c.passed ? "evals-pass" : "evals-fail");
  tr.dataset.case = caseKey(c);
  const name = el("td");
  if (c.threadId) {
    const link = el("button", "link evals-case-open", caseKey(c));
    link.type = "button";
    link.title = "Open this case's thread in the inspector";
    link.addEventListener("click", () => openThread(c.threadId).catch(showError));
    name.appendChild(link);
  } else name.textContent = caseKey(c);
  tr.append(name, el("td", "evals-result", c.passed ? "pass" : "fail"), el("td", null, scoresText(c.scores)),
    el("td", "num", String(c.tokens ?? 0)), el("td", "num", c.cost == null ? "-" : `$${Number(c.cost).toFixed(4)}`),
    el("td", "num", `${Math.round(c.latencyMs ?? 0)} ms`), el("td", "evals-reason", c.passed ? "" : reasonText(c)));
  return tr;
}

function table(head, rows) {
  const t = el("table", "evals-table");
  const tr = el("tr");
  for (const h of head) tr.appendChild(el("th", null, h));
  t.appendChild(el("thead")).appendChild(tr);
  const body = el("tbody");
  rows.forEach((r) => body.appendChild(r));
  t.appendChild(body);
  return t;
}

async function showRun(id) {
  const run = await api(`/evals/runs/${encodeURIComponent(id)}`);
  const box = $("evals-detail");
  box.replaceChildren(el("h3", null, `${run.label || run.id}: ${run.passed} passed, ${run.failed} failed`),
    table(["case", "result", "scores", "tokens", "cost", "latency", "why"], run.cases.map(caseRow)));
  box.dataset.run = run.id;
}

async function compare(ids) {
  const [a, b] = await Promise.all(ids.map((id) => api(`/evals/runs/${encodeURIComponent(id)}`)));
  const byKey = (run) => new Map(run.cases.map((c) => [caseKey(c), c]));
  const left = byKey(a);
  const right = byKey(b);
  const keys = [...new Set([...left.keys(), ...right.keys()])];
  const cell = (c) => (c ? `${c.passed ? "pass" : "fail"} ${scoresText(c.scores)}` : "-");
  const rows = keys.map((k) => {
    const x = left.get(k);
    const y = right.get(k);
    const tr = el("tr");
    tr.dataset.case = k;
    const changed = !x || !y || x.passed !== y.passed || scoresText(x.scores) !== scoresText(y.scores);
    if (changed) tr.className = x && y && x.passed && !y.passed ? "evals-regressed" : "evals-changed";
    tr.append(el("td", null, k), el("td", null, cell(x)), el("td", null, cell(y)));
    return tr;
  });
  const box = $("evals-detail");
  box.replaceChildren(el("h3", null, "Side by side"),
    table(["case", a.label || a.id, b.label || b.id], rows));
  box.dataset.run = "";
}

export async function refresh() {
  const { runs } = await api("/evals/runs");
  const list = el("ul", "evals-runs");
  runs.forEach((r) => list.appendChild(runRow(r)));
  if (!runs.length) list.appendChild(el("li", "runtime-empty", "no experiment yet: run standardagents eval PROJECT"));
  $("evals-list").replaceChildren(list);
  chosen = chosen.filter((id) => runs.some((r) => r.id === id));
  // the older run on the left, so a regression reads left to right
  const ordered = runs.filter((r) => chosen.includes(r.id)).sort((x, y) => x.startedAt - y.startedAt);
  if (ordered.length === 2) await compare(ordered.map((r) => r.id));
}

export function isOpen() { return !panel.hidden; }

export function toggle(open = panel.hidden) {
  panel.hidden = !open;
  $("evals-toggle").setAttribute("aria-pressed", String(open));
  if (open) refresh().catch(showError);
}

// The open thread's latest turn becomes a case in the project's evals/captured.yaml.
export async function captureTurn() {
  if (!state.thread) throw new Error("open a thread first");
  const done = await api("/evals/capture", { method: "POST", json: { threadId: state.thread.id } });
  $("eval-capture-note").textContent = `Captured ${done.case} into ${done.file}`;
}
