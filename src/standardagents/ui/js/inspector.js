// The inspector: each turn of the open thread as a timeline of its steps (model calls and the
// tool calls they asked for), with tokens, cost and latency on each, from the executions API.
//
// Bars are laid out from the recorded durations: a model call starts where the previous
// step's tools ended, its waiting part (time to first token) is drawn apart from its streaming
// part, and the tool calls it asked for start together when it ends (they run in parallel).
import { api } from "./api.js";
import { copyText } from "./markdown.js";
import * as rerun from "./rerun.js";
import { $, showError, state } from "./state.js";
import { showContent } from "./stepview.js";

const panel = $("inspector");
const turnsBox = $("inspector-turns");
const detail = $("inspector-detail");
let loaded = [];   // execution details of the open thread, oldest first

export function isOpen() { return !panel.hidden; }

export function toggle(open = panel.hidden) {
  panel.hidden = !open;
  $("inspector-toggle").setAttribute("aria-pressed", String(open));
  document.body.classList.toggle("inspecting", open);
  if (open) refresh().catch(showError);
}

function ms(v) {
  if (v === null || v === undefined) return "–";
  return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`;
}
function usd(v) { return v === null || v === undefined ? "cost unknown" : `$${Number(v).toFixed(4)}`; }
function tokens(u) { return (u && u.total_tokens) || 0; }

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

let running = null;     // the refresh in flight; another one asked meanwhile runs after it
let again = false;

export async function refresh() {
  if (running) { again = true; return running; }
  running = (async () => {
    do { again = false; await load(); } while (again);
  })().finally(() => { running = null; });
  return running;
}

async function load() {
  const thread = state.thread;
  if (!thread) { turnsBox.replaceChildren(); $("inspector-totals").textContent = "No thread"; return; }
  const { executions } = await api(`/threads/${thread.id}/executions`);
  const details = await Promise.all(executions.map((e) => api(`/executions/${e.id}`)));
  if (state.thread?.id !== thread.id) return;
  loaded = details;
  draw();
}

export function clear() {
  loaded = [];
  turnsBox.replaceChildren();
  detail.replaceChildren();
  $("inspector-totals").textContent = "";
}

function draw() {
  const total = loaded.reduce((a, e) => a + tokens(e.usage), 0);
  const priced = loaded.every((e) => e.cost !== null && e.cost !== undefined);
  const cost = loaded.reduce((a, e) => a + (e.cost || 0), 0);
  const totals = $("inspector-totals");
  totals.textContent = `${loaded.length} turn${loaded.length === 1 ? "" : "s"} · ${total} tokens · ${priced ? usd(cost) : "cost unknown"}`;
  totals.dataset.tokens = String(total);
  totals.dataset.cost = priced ? String(cost) : "";
  turnsBox.replaceChildren(...loaded.map(turn));
}

// Start and length (ms) of each bar of a turn, from the recorded durations.
export function layout(execution) {
  const bars = [];
  let cursor = 0;
  for (const step of execution.steps) {
    const latency = step.latencyMs || 0;
    bars.push({ kind: "model", step, start: cursor, length: latency, wait: Math.min(step.ttftMs ?? latency, latency) });
    cursor += latency;
    let longest = 0;
    for (const call of step.toolCalls) {
      const length = call.durationMs || 0;
      bars.push({ kind: "tool", step, call, start: cursor, length });
      longest = Math.max(longest, length);
    }
    cursor += longest;
  }
  return { bars, span: Math.max(cursor, 1) };
}

function turn(execution, index) {
  const section = el("section", "turn");
  section.dataset.executionId = execution.id;
  const head = el("header", "turn-head");
  head.append(el("strong", null, `Turn ${index + 1}`), el("span", `badge ${execution.status}`, execution.status));
  const figures = el("span", "turn-figures",
    `${ms(execution.durationMs)} · ${tokens(execution.usage)} tokens · ${usd(execution.cost)}`);
  figures.dataset.tokens = String(tokens(execution.usage));
  figures.dataset.cost = execution.cost === null || execution.cost === undefined ? "" : String(execution.cost);
  head.append(figures);
  section.append(head);
  if (execution.override) section.append(el("div", "turn-figures override", overrideText(execution.override)));
  if (execution.definitionsChanged) {
    const changed = execution.definitionsChanged;
    const what = changed.policy === "end" ? "ended by its agent's policy" : "went on with the new definitions";
    section.append(el("div", "turn-figures definitions-changed",
      `Definitions changed during this turn (a deploy: ${changed.from} → ${changed.to}); it ${what}.`));
  }
  if (execution.traceId) section.append(trace(execution));
  const { bars, span } = layout(execution);
  const chart = el("div", "timeline");
  chart.setAttribute("role", "list");
  for (const bar of bars) chart.append(row(bar, span, execution));
  section.append(chart);
  // what ran before any model call could take it (an input guardrail that stopped the turn)
  for (const g of execution.checks?.guardrails || []) {
    section.append(el("div", "turn-figures", `guardrail ${g.name} (${g.kind}) ${g.tripped ? "tripped" : "passed"}`));
  }
  for (const error of execution.errors || []) section.append(el("div", "turn-error", `${error.code}: ${error.message || ""}`));
  return section;
}

function overrideText(o) {
  const parts = [o.model ? `model ${o.model}` : null, typeof o.system === "string" ? "its own system prompt" : null];
  return `ran with ${parts.filter(Boolean).join(" and ")}`;
}

// The trace id links to the tracing UI when the server has a template (STANDARDAGENTS_TRACE_URL);
// otherwise it is plain text with a button that copies it.
function trace(execution) {
  if (execution.traceUrl) {
    const link = el("a", "trace", `trace ${execution.traceId}`);
    link.href = execution.traceUrl;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    return link;
  }
  const box = el("div", "trace", `trace ${execution.traceId}`);
  const copy = el("button", "copy-trace");
  copy.type = "button";
  copy.setAttribute("aria-label", "Copy the trace id");
  copy.addEventListener("click", () => copyText(execution.traceId, copy));
  box.append(copy);
  return box;
}

function row(bar, span, execution) {
  const line = el("div", `row ${bar.kind}`);
  line.setAttribute("role", "listitem");
  const button = el("button", `bar ${bar.kind}`);
  button.type = "button";
  button.style.left = `${(bar.start / span) * 100}%`;
  button.style.width = `${Math.max((bar.length / span) * 100, 0.5)}%`;
  let label; let figures;
  if (bar.kind === "model") {
    const s = bar.step;
    label = `${s.model || "model"}${s.side ? ` (side ${s.side})` : ""}`;
    figures = `${tokens(s.usage)} tok · ${usd(s.cost)} · ${ms(s.latencyMs)}`;
    Object.assign(button.dataset, { stepIndex: String(s.index), tokens: String(tokens(s.usage)),
      cost: s.cost === null || s.cost === undefined ? "" : String(s.cost), latencyMs: String(s.latencyMs ?? "") });
    const wait = el("span", "wait");
    wait.style.width = `${bar.length ? (bar.wait / bar.length) * 100 : 0}%`;
    button.append(wait);
    button.setAttribute("aria-label", `Model call ${label}: ${figures}`);
    button.addEventListener("click", () => showStep(s, execution));
  } else {
    const c = bar.call;
    label = `↳ ${c.name}`;
    figures = `${c.status || "?"} · ${ms(c.durationMs)}`;
    Object.assign(button.dataset, { toolCall: c.id, durationMs: String(c.durationMs ?? ""), status: c.status || "" });
    button.setAttribute("aria-label", `Tool call ${c.name}: ${figures}`);
    button.addEventListener("click", () => showTool(c));
  }
  const track = el("div", "track");
  track.append(button);
  const name = el("span", "row-label", label);
  name.title = label;
  line.append(name, track, el("span", "row-figures", figures));
  return line;
}

function fields(pairs) {
  const dl = el("dl");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(el("dt", null, k), el("dd", null, typeof v === "string" ? v : JSON.stringify(v)));
  }
  return dl;
}

function preview(id) {
  const m = state.messages.find((x) => x.id === id);
  if (!m) return id;
  const text = (m.content || (m.tool_calls ? `tool calls: ${m.tool_calls.map((c) => c.function.name).join(", ")}` : "")).slice(0, 120);
  return `${m.role}: ${text}`;
}

function showStep(s, execution) {
  const u = s.usage || {};
  const sent = s.sent || {};
  const again = el("button", "ghost rerun", "Re-run…");
  again.type = "button";
  again.setAttribute("aria-label", rerun.mayChoose(execution) ? `Re-run step ${s.index + 1} with another model or prompt`
    : `Re-run step ${s.index + 1} as it was`);
  again.addEventListener("click", () => rerun.open(execution, s).catch(showError));
  const actions = el("div", "step-actions");
  actions.append(again);
  detail.replaceChildren(el("h3", null, `Step ${s.index + 1}: model call`), actions, fields([
    ["provider", s.provider], ["model", s.model], ["answered by", s.responseModel], ["finish", s.finishReason],
    ["latency", ms(s.latencyMs)], ["first token", s.ttftMs === null || s.ttftMs === undefined ? null : ms(s.ttftMs)],
    ["tokens", `${u.prompt_tokens ?? 0} in · ${u.completion_tokens ?? 0} out · ${u.total_tokens ?? 0} total`],
    ["cost", usd(s.cost)],
  ]), el("h4", null, "Request"), fields([
    ["messages sent", sent.count], ["first", sent.first ? preview(sent.first) : null],
    ["last", sent.last ? preview(sent.last) : null], ["tools offered", (s.tools || []).join(", ") || "none"],
  ]));
  if (s.attempts && s.attempts.length) {
    detail.append(el("h4", null, "Failed attempts"),
      fields(s.attempts.map((a, i) => [`#${i + 1} ${a.provider}/${a.model}`, a.error])));
  }
  if (s.hooks && s.hooks.length) detail.append(el("h4", null, "Hooks"), checks(s.hooks, hookLine));
  if (s.guardrails && s.guardrails.length) detail.append(el("h4", null, "Guardrails"), checks(s.guardrails, guardLine));
  detail.dataset.showing = "step";
  detail.dataset.step = String(s.index);
  showContent(detail, execution.id, s.index).catch(showError);
}

function checks(entries, line) {
  const list = el("ul", "checks");
  for (const entry of entries) list.append(line(entry));
  return list;
}

function hookLine(h) {
  const li = el("li", "hook");
  li.dataset.outcome = h.outcome;
  const took = h.durationMs === null || h.durationMs === undefined || h.durationMs >= 10 ? ms(h.durationMs)
    : `${Number(h.durationMs).toFixed(2)} ms`;   // hooks are often well under a millisecond
  li.append(el("span", null, h.name), el("span", "muted", h.event), el("span", "outcome", h.outcome),
    el("span", "muted", took));
  if (h.error) li.title = h.error;
  return li;
}

function guardLine(g) {
  const li = el("li", "guardrail");
  li.dataset.tripped = String(Boolean(g.tripped));
  li.append(el("span", null, g.name), el("span", "muted", g.kind), el("span", "outcome", g.tripped ? "tripped" : "passed"));
  return li;
}

function showTool(c) {
  let args = c.arguments;
  try { args = JSON.stringify(JSON.parse(c.arguments), null, 2); } catch (_) { /* as sent */ }
  detail.replaceChildren(el("h3", null, `Tool call: ${c.name}`), fields([
    ["status", c.status], ["duration", ms(c.durationMs)], ["id", c.id],
    ["repaired", c.repaired ? "yes" : "no"],
  ]), el("h4", null, "Arguments"), el("pre", "args", args));
  if (c.repairNotes && c.repairNotes.length) {
    detail.append(el("h4", null, "Repairs"), el("pre", "repairs", c.repairNotes.map((n) => (typeof n === "string" ? n : JSON.stringify(n))).join("\n")));
  }
  detail.append(el("h4", null, c.error ? "Error" : "Result"),
    el("pre", "result", typeof (c.error || c.result) === "string" ? (c.error || c.result) : JSON.stringify(c.error || c.result, null, 2)));
  detail.dataset.showing = "tool";
}
