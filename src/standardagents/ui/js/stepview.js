// What one model step saw and said, from GET /api/executions/{id}/steps/{n}: the messages it
// was sent (system prompt first, as rendered), the tools offered with their schemas, the reply
// (text, reasoning, tool calls) and each tool call's result. Long text is clipped to a few
// lines with "show all"; "Copy as JSON" copies the whole step as the API answered it.
import { api } from "./api.js";
import { copyText } from "./markdown.js";

// text longer than this (characters or lines) starts clipped
const LONG_CHARS = 600;
const LONG_LINES = 12;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function pretty(value) {
  if (typeof value !== "string") return JSON.stringify(value, null, 2);
  try { return JSON.stringify(JSON.parse(value), null, 2); } catch (_) { return value; }
}

function ms(v) {
  if (v === null || v === undefined) return "–";
  return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`;
}

// A block of text, clipped with a "show all" button when it is long.
export function clipped(text, cls = "") {
  const box = el("div", "clip-box");
  const pre = el("pre", `content ${cls}`.trim(), text ?? "");
  box.append(pre);
  const lines = (text || "").split("\n").length;
  if ((text || "").length > LONG_CHARS || lines > LONG_LINES) {
    pre.classList.add("clipped");
    const more = el("button", "ghost show-all", "show all");
    more.type = "button";
    more.addEventListener("click", () => {
      const open = pre.classList.toggle("clipped");
      more.textContent = open ? "show all" : "show less";
    });
    box.append(more);
  }
  return box;
}

function messageBlock(m, i) {
  const item = el("li", `sent-msg role-${m.role}`);
  item.dataset.role = m.role;
  const head = el("div", "sent-head");
  head.append(el("span", "sent-role", m.role), el("span", "muted", `#${i + 1}`));
  if (m.tool_call_id) head.append(el("span", "muted", `for ${m.tool_call_id}`));
  item.append(head);
  const content = Array.isArray(m.content) ? pretty(m.content) : m.content;
  if (content) item.append(clipped(content));
  for (const call of m.tool_calls || []) {
    item.append(el("div", "sent-call", `→ ${call.function?.name}(${call.function?.arguments ?? ""})`));
  }
  return item;
}

function toolBlock(t) {
  const fn = t.function || t;
  const item = el("li", "offered-tool");
  item.dataset.tool = fn.name;
  const head = el("div", "sent-head");
  head.append(el("strong", null, fn.name));
  item.append(head);
  if (fn.description) item.append(el("div", "muted tool-description", fn.description));
  item.append(clipped(pretty(fn.parameters ?? {}), "schema"));
  return item;
}

function replyBlock(step) {
  const r = step.reply;
  const box = el("div", "step-reply");
  if (r.status && r.status !== "complete") box.append(el("div", `reply-status ${r.status}`, r.status === "stopped"
    ? "stopped before it finished" : r.status));
  if (r.reasoning) {
    const thought = el("details", "reasoning");
    thought.append(el("summary", null, "reasoning"), clipped(r.reasoning));
    box.append(thought);
  }
  box.append(clipped(r.content || (r.toolCalls.length ? "(tool calls only)" : "(no text)"), "reply"));
  const results = new Map(step.toolCalls.map((c) => [c.id, c]));
  for (const call of r.toolCalls) {
    const ran = results.get(call.id) || {};
    const card = el("div", "step-call");
    card.dataset.toolCall = call.id;
    card.dataset.status = ran.status || "";
    card.append(el("div", "sent-head", `${call.name} · ${ran.status || "not run"} · ${ms(ran.durationMs)}`));
    card.append(el("div", "muted", "arguments"), clipped(pretty(call.arguments), "args"));
    if (ran.error || ran.result !== undefined && ran.result !== null) {
      card.append(el("div", "muted", ran.error ? "error" : "result"), clipped(pretty(ran.error || ran.result), "result"));
    }
    if (ran.approval) card.append(el("div", "muted", approvalText(ran.approval)));
    box.append(card);
  }
  return box;
}

function approvalText(a) {
  const who = a.decidedByName || a.decidedBy || "someone";
  const when = a.decidedAt;
  return `${a.approved === false || a.decision === "deny" ? "denied" : "approved"} by ${who}`
    + (when ? ` at ${new Date(when).toLocaleString()}` : "");
}

// The step's content appended to ``target`` (the inspector's detail pane).
export async function showContent(target, executionId, index) {
  const holder = el("div", "step-content");
  holder.append(el("div", "muted", "loading what the model saw…"));
  target.append(holder);
  const step = await api(`/executions/${executionId}/steps/${index}`);
  const copy = el("button", "ghost copy-step", "Copy as JSON");
  copy.type = "button";
  copy.addEventListener("click", () => copyText(JSON.stringify(step, null, 2), copy));
  const sent = el("ol", "sent-messages");
  step.messages.forEach((m, i) => sent.append(messageBlock(m, i)));
  const tools = el("ul", "offered-tools");
  for (const t of step.tools) tools.append(toolBlock(t));
  holder.replaceChildren(copy,
    el("h4", null, `Messages sent (${step.messages.length})${step.exact ? "" : " · rebuilt, may differ"}`), sent,
    el("h4", null, `Tools offered (${step.tools.length})`), step.tools.length ? tools : el("div", "muted", "none"),
    el("h4", null, "Reply"), replyBlock(step));
  holder.dataset.loaded = "true";
  return step;
}
