// The web chat: pick an agent, start or resume a thread, and watch the reply stream in.
"use strict";

const API = document.querySelector('meta[name="sa-api-prefix"]').content || "/api";
const $ = (id) => document.getElementById(id);
const ui = {
  agent: $("agent-select"), threads: $("thread-list"), messages: $("messages"), input: $("input"),
  send: $("send"), stop: $("stop"), title: $("thread-title"), status: $("status"), error: $("error"),
  token: $("token-input"),
};
let current = null;          // the open thread id
let currentAgent = null;     // the open thread's agent
const sideLabels = new Map(); // agent name -> {a: label, b: label}
let streaming = null;        // AbortController of the reply being streamed
const bubbles = new Map();   // message id -> element
const cards = new Map();     // tool call id -> element

function headers(extra = {}) {
  const token = localStorage.getItem("sa-token");
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(API + path, { ...options, headers: headers(options.headers || {}) });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response.status === 204 ? null : response.json();
}

function showError(err) {
  ui.error.textContent = err ? String(err.message || err) : "";
  ui.error.hidden = !err;
}

function setBusy(busy) {
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  ui.status.textContent = busy ? "replying…" : "";
}

function scroll() { ui.messages.scrollTop = ui.messages.scrollHeight; }

function bubble(id, role, text, side) {
  let el = id ? bubbles.get(id) : null;
  if (!el) {
    el = document.createElement("div");
    el.className = `msg ${role}`;
    el.dataset.role = role;
    if (side) {
      el.dataset.side = side;
      el.dataset.sideLabel = (sideLabels.get(currentAgent) || {})[side] || `Side ${side.toUpperCase()}`;
    }
    if (id) { el.dataset.id = id; bubbles.set(id, el); }
    ui.messages.appendChild(el);
  }
  if (text !== undefined && text !== null) el.textContent = text;
  scroll();
  return el;
}

function toolCard(id, name, state, detail) {
  let el = cards.get(id);
  if (!el) {
    el = document.createElement("div");
    el.className = "tool-card";
    el.dataset.toolCall = id;
    el.innerHTML = '<span class="tool-state"></span><div class="tool-name"></div><div class="tool-detail"></div>';
    cards.set(id, el);
    ui.messages.appendChild(el);
  }
  el.classList.remove("running", "done", "failed");
  el.classList.add(state);
  el.dataset.state = state;
  el.querySelector(".tool-name").textContent = name;
  el.querySelector(".tool-state").textContent = state;
  if (detail !== undefined) el.querySelector(".tool-detail").textContent = detail || "";
  scroll();
  return el;
}

function renderMessage(m) {
  if (m.role === "user") bubble(m.id, "user", m.content || "");
  else if (m.role === "assistant") {
    if (m.content) bubble(m.id, "assistant", m.content, m.side);
    for (const call of m.tool_calls || []) toolCard(call.id, call.function.name, "done", call.function.arguments);
  } else if (m.role === "tool" && m.tool_call_id) {
    const failed = m.tool_status === "error";
    toolCard(m.tool_call_id, m.name || "tool", failed ? "failed" : "done", m.content);
  }
}

// What the running turn has spent so far (from its usage events), shown when it ends.
const turnUsage = { tokens: 0, cost: null, priced: true, seen: false };

function usageLine(tokens, cost) {
  const el = document.createElement("div");
  el.className = "turn-usage";
  const spent = cost === null || cost === undefined ? "cost unknown" : `$${Number(cost).toFixed(4)}`;
  el.textContent = `${tokens} tokens · ${spent}`;
  ui.messages.appendChild(el);
  scroll();
}

function onEvent(event) {
  const d = event.data || {};
  switch (event.type) {
    case "usage":
      turnUsage.seen = true;
      turnUsage.tokens += (d.usage || {}).total_tokens || 0;
      if (d.cost === null || d.cost === undefined) turnUsage.priced = false;
      turnUsage.cost = d.executionCost ?? turnUsage.cost;
      break;
    case "message_created":
      if (d.message && d.message.role !== "tool" && !(d.message.role === "assistant" && !d.message.content)) renderMessage(d.message);
      break;
    case "message_chunk": {
      const el = bubble(d.messageId, "assistant", undefined, d.side);
      el.textContent += d.delta || "";
      scroll();
      break;
    }
    case "message_updated":
      if (d.message && d.message.role === "assistant" && d.message.content) bubble(d.message.id, "assistant", d.message.content);
      break;
    case "tool_call_started":
      toolCard(d.id, d.name, "running", d.progress ? String(d.progress) : "");
      break;
    case "tool_call_done":
      toolCard(d.id, d.name, d.status === "error" ? "failed" : "done", d.error || d.result || undefined);
      break;
    case "approval.request":
      approvalCard(d);
      break;
    case "guardrail":
      showError(`Stopped by the ${d.kind} guardrail ${d.guardrail}` + (d.info ? `: ${JSON.stringify(d.info)}` : ""));
      break;
    case "error":
      showError(d.message);
      break;
    case "done":
      if (d.outcome === "cancelled" || d.stopReason === "cancelled") ui.status.textContent = "stopped";
      if (turnUsage.seen) usageLine(turnUsage.tokens, turnUsage.priced ? turnUsage.cost : null);
      Object.assign(turnUsage, { tokens: 0, cost: null, priced: true, seen: false });
      break;
  }
}

// A call waiting for a person: approve or deny it; the same turn then continues, followed live.
function approvalCard(d) {
  const el = toolCard(d.id, d.tool, "waiting", JSON.stringify(d.arguments));
  if (el.querySelector(".approval")) return;
  const row = document.createElement("div");
  row.className = "approval";
  for (const [label, approved] of [["Approve", true], ["Deny", false]]) {
    const button = document.createElement("button");
    button.textContent = label;
    button.className = approved ? "approve" : "deny";
    button.addEventListener("click", () => decide(d, approved, row));
    row.appendChild(button);
  }
  el.appendChild(row);
}

async function decide(d, approved, row) {
  row.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  const thread = current;
  streaming = new AbortController();
  setBusy(true);
  try {
    const stream = await fetch(`${API}/threads/${thread}/stream`, { headers: headers(), signal: streaming.signal });
    const body = JSON.stringify({ token: d.token, approved });
    await api(`/threads/${thread}/approvals`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
    row.remove();
    toolCard(d.id, d.tool, approved ? "running" : "failed", approved ? undefined : "denied");
    await readSSE(stream, (event) => {
      onEvent(event);
      if (event.type === "done" && (event.data || {}).executionId === d.executionId) streaming.abort();
    });
  } catch (err) {
    if (err.name !== "AbortError") { showError(err); row.querySelectorAll("button").forEach((b) => { b.disabled = false; }); }
  } finally {
    streaming = null;
    setBusy(false);
  }
}

// Reads an SSE body from fetch (so the Authorization header can be sent) and dispatches events.
async function readSSE(response, handle) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data) handle(JSON.parse(data));
    }
  }
}

async function loadAgents() {
  const { agents } = await api("/agents");
  ui.agent.innerHTML = "";
  for (const a of agents) {
    const option = document.createElement("option");
    option.value = a.name;
    option.textContent = a.name;
    option.title = a.description || "";
    sideLabels.set(a.name, a.sides || {});
    ui.agent.appendChild(option);
  }
}

async function loadThreads() {
  const { threads } = await api("/threads?limit=50");
  ui.threads.innerHTML = "";
  for (const t of threads) {
    const li = document.createElement("li");
    li.textContent = t.title || `${t.agent_id} · ${new Date(t.created_at).toLocaleString()}`;
    li.dataset.threadId = t.id;
    li.classList.toggle("active", t.id === current);
    li.addEventListener("click", () => openThread(t.id).catch(showError));
    ui.threads.appendChild(li);
  }
}

async function openThread(id) {
  current = id;
  bubbles.clear(); cards.clear();
  ui.messages.innerHTML = "";
  const thread = await api(`/threads/${id}`);
  currentAgent = thread.agent_id;
  ui.title.textContent = thread.title || `${thread.agent_id} — ${id}`;
  const { messages } = await api(`/threads/${id}/messages?limit=500`);
  messages.forEach(renderMessage);
  setBusy(false);
  for (const li of ui.threads.children) li.classList.toggle("active", li.dataset.threadId === id);
}

async function newThread() {
  const thread = await api("/threads", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ agent: ui.agent.value }),
  });
  await loadThreads();
  await openThread(thread.id);
  ui.input.focus();
}

async function send(text) {
  if (!current) await newThread();
  showError(null);
  streaming = new AbortController();
  setBusy(true);
  try {
    const response = await fetch(`${API}/threads/${current}/messages?stream=true`, {
      method: "POST", signal: streaming.signal,
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ content: text }),
    });
    if (!response.ok) {
      let message = `${response.status}`;
      try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
      throw new Error(message);
    }
    await readSSE(response, onEvent);
  } catch (err) {
    if (err.name !== "AbortError") showError(err);
  } finally {
    streaming = null;
    setBusy(false);
  }
}

ui.send.disabled = true;
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = ui.input.value.trim();
  if (!text || streaming) return;
  ui.input.value = "";
  send(text);
});
ui.input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
});
ui.stop.addEventListener("click", async () => {
  if (!current) return;
  try { await api(`/threads/${current}/stop`, { method: "POST" }); } catch (err) { showError(err); }
});
$("new-thread").addEventListener("click", () => newThread().catch(showError));
$("token-save").addEventListener("click", () => {
  localStorage.setItem("sa-token", ui.token.value.trim());
  start();
});

async function start() {
  try {
    showError(null);
    await loadAgents();
    await loadThreads();
    ui.send.disabled = false;
  } catch (err) {
    showError(err);
    $("token-box").open = true;
  }
}
start();
