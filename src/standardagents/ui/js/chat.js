// The conversation: message bubbles (markdown), tool cards, approvals, and a turn's live events.
import { api, openStream, readSSE, sendStreaming } from "./api.js";
import { renderMarkdown } from "./markdown.js";
import { showProviderResults } from "./provider_results.js";
import { $, positionOf, remember, showError, state } from "./state.js";

const box = $("messages");
const bubbles = new Map();   // message id -> element
const texts = new Map();     // message id -> raw markdown (streamed chunks are appended here)
const cards = new Map();     // tool call id -> element
const pending = new Set();   // bubbles whose markdown is re-rendered on the next frame
const listeners = { turnEnded: [], fork: null };

export function onTurnEnded(fn) { listeners.turnEnded.push(fn); }
export function onFork(fn) { listeners.fork = fn; }

export function clearChat() {
  note = "";
  bubbles.clear(); texts.clear(); cards.clear(); pending.clear();
  box.replaceChildren();
}

let quiet = false;            // while a whole thread is drawn, scrolling waits for the end
function scroll() { if (!quiet) box.scrollTop = box.scrollHeight; }

// Draw a thread's stored messages in one go (one layout and one scroll at the end).
export function renderAll(messages) {
  quiet = true;
  try {
    // each turn's tokens and cost follow its last message, as they did when it ended live
    let turn = null; let spent = null;
    const close = () => { if (spent && spent.seen) usageLine(spent.tokens, spent.priced ? spent.cost : null); };
    for (const m of messages) {
      const eid = (m.metadata || {}).executionId;
      if (eid && eid !== turn) { close(); turn = eid; spent = { tokens: 0, cost: 0, priced: true, seen: false }; }
      else if (!eid && m.role === "user" && turn) { close(); turn = null; spent = null; }
      renderMessage(m);
      if (spent && m.role === "assistant" && m.usage) {
        spent.seen = true;
        spent.tokens += m.usage.total_tokens || 0;
        if (m.cost === null || m.cost === undefined) spent.priced = false; else spent.cost += m.cost;
      }
    }
    close();
  } finally { quiet = false; }
  scroll();
}

let note = "";                // what the status shows once the turn ended ("stopped")

export function setBusy(busy) {
  if (busy) note = "";
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("status").textContent = busy ? "replying…" : note;
}

function flush() {
  for (const id of pending) {
    const el = bubbles.get(id);
    if (el) renderMarkdown(el.querySelector(".msg-body"), texts.get(id));
  }
  pending.clear();
  scroll();
}

function bubble(id, role, text, side) {
  let el = id ? bubbles.get(id) : null;
  if (!el) {
    el = document.createElement("div");
    el.className = `msg ${role}`;
    el.dataset.role = role;
    if (side) {
      el.dataset.side = side;
      el.dataset.sideLabel = (state.sideLabels.get(state.thread?.agent_id) || {})[side] || `Side ${side.toUpperCase()}`;
    }
    const body = document.createElement("div");
    body.className = "msg-body";
    el.appendChild(body);
    if (id) { el.dataset.id = id; bubbles.set(id, el); actions(el, id, role); }
    box.appendChild(el);
  }
  if (text !== undefined && text !== null) {
    texts.set(id, text);
    renderMarkdown(el.querySelector(".msg-body"), text);
  }
  scroll();
  return el;
}

// Edit (a user message) and regenerate (a reply) both fork the thread: see forkPoint.
function actions(el, id, role) {
  if (role !== "user" && role !== "assistant") return;
  const row = document.createElement("div");
  row.className = "msg-actions";
  const button = document.createElement("button");
  button.type = "button";
  button.className = role === "user" ? "edit" : "regenerate";
  button.setAttribute("aria-label", role === "user" ? "Edit and resend as a fork" : "Regenerate as a fork");
  button.title = button.getAttribute("aria-label");
  button.addEventListener("click", () => (role === "user" ? startEdit(id) : regenerate(id)).catch(showError));
  row.appendChild(button);
  el.appendChild(row);
}

function text(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function prettyArgs(args) {
  if (typeof args !== "string") return text(args);
  try { return JSON.stringify(JSON.parse(args)); } catch (_) { return args; }
}

// One card per tool call, with the same parts live and after a reload: name, state,
// arguments and (once done) the result or the error.
function toolCard(id, name, status, { args, detail } = {}) {
  let el = cards.get(id);
  if (!el) {
    el = document.createElement("div");
    el.className = "tool-card";
    el.dataset.toolCall = id;
    el.innerHTML = '<span class="tool-state"></span><div class="tool-name"></div>'
      + '<div class="tool-args"></div><div class="tool-detail"></div>';
    cards.set(id, el);
    box.appendChild(el);
  }
  el.classList.remove("running", "done", "failed", "waiting");
  el.classList.add(status);
  el.dataset.state = status;
  el.querySelector(".tool-name").textContent = name;
  el.querySelector(".tool-state").textContent = status;
  if (args !== undefined) el.querySelector(".tool-args").textContent = prettyArgs(args);
  if (detail !== undefined) limit(el, text(detail));
  scroll();
  return el;
}

// A reply cut short by a stop says so, live and after a reload.
function markStopped(el, status) {
  if (status !== "cancelled" || el.querySelector(".stopped-mark")) return;
  el.classList.add("stopped");
  const mark = document.createElement("div");
  mark.className = "stopped-mark";
  mark.textContent = "stopped";
  el.querySelector(".msg-body").after(mark);
}

// A long result is held to a few lines until "show all".
function limit(card, value) {
  const detail = card.querySelector(".tool-detail");
  detail.textContent = value;
  const long = value.length > 400 || value.split("\n").length > 8;
  detail.classList.toggle("clipped", long);
  let more = card.querySelector(".show-all");
  if (!long) { more?.remove(); return; }
  if (!more) {
    more = document.createElement("button");
    more.type = "button";
    more.className = "ghost show-all";
    more.addEventListener("click", () => {
      more.textContent = detail.classList.toggle("clipped") ? "show all" : "show less";
    });
    detail.after(more);
  }
  more.textContent = "show all";
}

export function renderMessage(m) {
  remember(m);
  if (m.role === "user") bubble(m.id, "user", m.content || "");
  else if (m.role === "assistant") {
    if (m.content) markStopped(bubble(m.id, "assistant", m.content, m.side), m.status);
    if (m.metadata?.providerResults) showProviderResults(bubble(m.id, "assistant", m.content ? undefined : "", m.side), m.metadata);
    for (const call of m.tool_calls || []) {
      if (!cards.has(call.id)) toolCard(call.id, call.function.name, "running", { args: call.function.arguments, detail: "" });
    }
  } else if (m.role === "tool" && m.tool_call_id) {
    const failed = m.tool_status === "error";
    const detail = failed && typeof m.content === "string" && m.content.startsWith("Error: ") ? m.content.slice(7) : m.content;
    const card = toolCard(m.tool_call_id, m.name || "tool", failed ? "failed" : "done", { detail });
    const approval = m.metadata?.approval;
    if (approval?.decidedAt) decidedLater(card, approval);
  }
}

// Who is reading, asked once: a decision of theirs reads "by you" after a reload as it did live.
let me = null;
function whoAmI() {
  me ??= api("/users/me").catch(() => ({}));
  return me;
}

// A stored decision (the call's result keeps who decided and when) drawn as the live one was.
async function decidedLater(card, approval) {
  const reader = await whoAmI();
  const by = approval.decidedBy;
  const who = !by || by === reader.id ? null : approval.decidedByName || by;
  decided(card, approval.approved !== false, new Date(approval.decidedAt), who);
}

// What the running turn has spent so far (from its usage events), shown when it ends.
const turnUsage = { tokens: 0, cost: null, priced: true, seen: false };

function usageLine(tokens, cost) {
  const el = document.createElement("div");
  el.className = "turn-usage";
  const spent = cost === null || cost === undefined ? "cost unknown" : `$${Number(cost).toFixed(4)}`;
  el.textContent = `${tokens} tokens · ${spent}`;
  box.appendChild(el);
  scroll();
}

// Executions this page started or continued: the thread's own stream skips their events.
export const own = new Set();

export function onEvent(event) {
  const d = event.data || {};
  if (d.executionId) own.add(d.executionId);
  switch (event.type) {
    case "usage":
      turnUsage.seen = true;
      turnUsage.tokens += (d.usage || {}).total_tokens || 0;
      if (d.cost === null || d.cost === undefined) turnUsage.priced = false;
      turnUsage.cost = d.executionCost ?? turnUsage.cost;
      break;
    case "message_created":
      if (!d.message) break;
      remember(d.message);
      if (d.message.role !== "tool" && !(d.message.role === "assistant" && !d.message.content && !d.message.metadata?.providerResults)) renderMessage(d.message);
      break;
    case "message_chunk": {
      const id = d.messageId;
      bubble(id, "assistant", undefined, d.side);
      texts.set(id, (texts.get(id) || "") + (d.delta || ""));
      if (!pending.size) requestAnimationFrame(flush);
      pending.add(id);
      break;
    }
    case "message_updated":
      if (!d.message) break;
      remember(d.message);
      if (d.message.role === "assistant" && d.message.content) {
        markStopped(bubble(d.message.id, "assistant", d.message.content, d.message.side), d.message.status);
      }
      if (d.message.role === "assistant" && d.message.metadata?.providerResults) {
        showProviderResults(bubble(d.message.id, "assistant", undefined, d.message.side), d.message.metadata);
      }
      break;
    case "tool_call_started":
      toolCard(d.id, d.name, "running", { args: d.arguments, detail: d.progress ? String(d.progress) : "" });
      break;
    case "tool_call_done":
      toolCard(d.id, d.name, d.status === "error" ? "failed" : "done", { args: d.arguments, detail: d.error || d.result });
      break;
    case "approval.request":
      approvalCard(d);
      break;
    case "subagent_created":
      subagentStarted(d);
      break;
    case "guardrail":
      showError(`Stopped by the ${d.kind} guardrail ${d.guardrail}` + (d.info ? `: ${JSON.stringify(d.info)}` : ""));
      break;
    case "error":
      showError(d.message);
      break;
    case "done":
      if (d.outcome === "cancelled" || d.stopReason === "cancelled") { note = "stopped"; $("status").textContent = note; }
      if (turnUsage.seen) usageLine(turnUsage.tokens, turnUsage.priced ? turnUsage.cost : null);
      Object.assign(turnUsage, { tokens: 0, cost: null, priced: true, seen: false });
      for (const fn of listeners.turnEnded) fn(d);
      break;
  }
}

// A call waiting for a person: approve or deny it; the same turn then continues, followed live.
export function approvalCard(d) {
  const el = toolCard(d.id, d.tool, "waiting", { args: JSON.stringify(d.arguments), detail: "waiting for your decision" });
  if (el.querySelector(".approval")) return;
  const row = document.createElement("div");
  row.className = "approval";
  for (const [label, approved] of [["Approve", true], ["Deny", false]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = label;
    button.className = approved ? "approve" : "deny";
    button.addEventListener("click", () => decide(d, approved, row));
    row.appendChild(button);
  }
  el.appendChild(row);
}

function decided(card, approved, at, who = null) {
  who ??= "you";
  let line = card.querySelector(".decided");
  if (!line) { line = document.createElement("div"); line.className = "decided"; card.appendChild(line); }
  line.textContent = `${approved ? "approved" : "denied"} by ${who} at ${at.toLocaleTimeString()}`;
}

async function decide(d, approved, row) {
  row.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  if (d.executionId) own.add(d.executionId);
  const thread = state.thread.id;
  const controller = new AbortController();
  state.streaming = controller;
  setBusy(true);
  try {
    const stream = await openStream(thread, controller.signal);
    await api(`/threads/${thread}/approvals`, { method: "POST", json: { token: d.token, approved } });
    row.remove();
    const card = toolCard(d.id, d.tool, approved ? "running" : "failed", approved ? { detail: "" } : { detail: "denied" });
    decided(card, approved, new Date());
    await readSSE(stream, (event) => {
      onEvent(event);
      if (event.type === "done" && (event.data || {}).executionId === d.executionId) controller.abort();
    });
  } catch (err) {
    if (err.name !== "AbortError") { showError(err); row.querySelectorAll("button").forEach((b) => { b.disabled = false; }); }
  } finally {
    state.streaming = null;
    setBusy(false);
  }
}

export async function send(content) {
  showError(null);
  state.streaming = new AbortController();
  setBusy(true);
  try {
    const response = await sendStreaming(state.thread.id, content, state.streaming.signal);
    await readSSE(response, onEvent);
  } catch (err) {
    if (err.name !== "AbortError") showError(err);
  } finally {
    state.streaming = null;
    setBusy(false);
  }
}

export async function stop() {
  if (!state.thread || !state.streaming) return;
  try { await api(`/threads/${state.thread.id}/stop`, { method: "POST" }); } catch (err) { showError(err); }
}

// -- forks: edit-and-resend and regenerate --------------------------------------------------
async function startEdit(id) {
  const message = state.messages.find((m) => m.id === id);
  if (!message) return;
  state.editing = message;
  $("input").value = message.content || "";
  $("editing").hidden = false;
  $("input").focus();
}

export function cancelEdit() {
  state.editing = null;
  $("editing").hidden = true;
}

// Regenerating a reply resends the user message it answered, in a fork kept up to before it.
async function regenerate(id) {
  const at = positionOf(id);
  for (let i = at; i >= 0; i -= 1) {
    const m = state.messages[i];
    if (m.role === "user") { await listeners.fork(m, m.content || ""); return; }
  }
}

// The last message a fork keeps when ``message`` is replaced (null: nothing before it).
export function forkPoint(message) {
  const at = positionOf(message.id);
  return at > 0 ? state.messages[at - 1].id : null;
}

// -- subagents: a child thread shown inside the tool card of the call that ran it --------------
// The parent's subagent runs come from GET .../subagents, oldest first; each is matched to the
// next card of the same tool name (a subagent's tool is named after its agent), so the child
// thread never needs its own entry in the thread list.
export async function attachSubagents(threadId) {
  const { subagents } = await api(`/threads/${threadId}/subagents`);
  if (state.thread?.id !== threadId) return;
  const used = new Set();
  for (const link of subagents) {
    const card = [...cards.values()].find((el) => !used.has(el)
      && el.querySelector(".tool-name").textContent === link.agent);
    if (!card) continue;
    used.add(card);
    const current = card.querySelector(".subagent-thread");
    if (current?.dataset.childThread === link.childThreadId) {
      current.querySelector("summary").textContent = summaryText(link);
      continue;
    }
    current?.remove();
    card.appendChild(subagentBox(link));
  }
}

function summaryText(link) { return `${link.agent}'s thread (${link.status})`; }

function subagentBox(link) {
  const box = document.createElement("details");
  box.className = "subagent-thread";
  box.dataset.childThread = link.childThreadId;
  const summary = document.createElement("summary");
  summary.textContent = summaryText(link);
  const body = document.createElement("div");
  body.className = "subagent-messages";
  box.append(summary, body);
  // read again at each opening: a running child keeps adding messages
  box.addEventListener("toggle", () => {
    if (box.open) loadChild(link.childThreadId, body).catch(showError);
  });
  return box;
}

// Live: the running call to a subagent gets its disclosure as soon as the child thread exists.
function subagentStarted(d) {
  const card = [...cards.values()].reverse().find((el) => el.dataset.state === "running"
    && el.querySelector(".tool-name").textContent === d.agent && !el.querySelector(".subagent-thread"));
  if (card) card.appendChild(subagentBox({ childThreadId: d.childThreadId, agent: d.agent, status: "running" }));
}

async function loadChild(childId, body) {
  const { messages } = await api(`/threads/${childId}/messages?limit=500`);
  body.replaceChildren();
  for (const m of messages) {
    const el = document.createElement("div");
    el.className = `sub-msg ${m.role}`;
    el.dataset.role = m.role;
    if (m.side) el.dataset.side = m.side;
    const who = document.createElement("div");
    who.className = "sub-who";
    who.textContent = m.role === "tool" ? `${m.name || "tool"} result` : (m.side ? `${m.role} · side ${m.side}` : m.role);
    const content = document.createElement("div");
    content.className = "msg-body";
    if (m.role === "tool") content.textContent = text(m.content);
    else renderMarkdown(content, m.content || "");
    el.append(who, content);
    for (const call of m.tool_calls || []) {
      const line = document.createElement("div");
      line.className = "sub-call";
      line.textContent = `→ ${call.function.name} ${prettyArgs(call.function.arguments)}`;
      el.appendChild(line);
    }
    body.appendChild(el);
  }
  if (!messages.length) body.textContent = "No messages yet.";
}
