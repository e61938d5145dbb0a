// The web app's entry: wires the thread list, the chat, the inspector and the theme together.
import { api } from "./api.js";
import * as chat from "./chat.js";
import * as evals from "./evals.js";
import * as inspector from "./inspector.js";
import * as live from "./live.js";
import * as rerun from "./rerun.js";
import * as runtime from "./runtime.js";
import * as signin from "./signin.js";
import { $, forget, showError, state } from "./state.js";
import "./phone.js";
import "./schedules.js";
import { loadThreads, markActive, onOpen, titleOf, wireFilters } from "./threads.js";
import * as webhooks from "./webhooks.js";

const PAGE = 500;

async function loadAgents() {
  const { agents } = await api("/agents");
  state.agents = agents;
  const select = $("agent-select");
  const filter = $("filter-agent");
  select.replaceChildren();
  filter.replaceChildren(new Option("All agents", ""));
  for (const a of agents) {
    const option = new Option(a.name, a.name);
    option.title = a.description || "";
    state.sideLabels.set(a.name, a.sides || {});
    select.appendChild(option);
    filter.appendChild(new Option(a.name, a.name));
  }
}

// All of a thread's messages: the first page says how many there are, the rest come at once.
async function allMessages(id) {
  const first = await api(`/threads/${id}/messages?limit=${PAGE}`);
  const pages = [];
  for (let offset = PAGE; offset < first.total; offset += PAGE) {
    pages.push(api(`/threads/${id}/messages?limit=${PAGE}&offset=${offset}`));
  }
  return [first, ...(await Promise.all(pages))].flatMap((p) => p.messages);
}

async function openThread(id) {
  chat.cancelEdit();
  chat.clearChat();
  inspector.clear();
  forget();
  state.thread = null;
  rerun.describeBranch(null);
  if (!id) { $("thread-title").textContent = "No thread"; markActive(); live.follow(); return; }
  const [thread, messages, waiting] = await Promise.all([api(`/threads/${id}`), allMessages(id), approvals(id)]);
  state.thread = thread;
  $("thread-title").textContent = titleOf(thread);
  rerun.describeBranch(thread);
  chat.renderAll(messages);
  waiting.forEach(chat.approvalCard);
  chat.attachSubagents(id).catch(showError);
  chat.setBusy(false);
  markActive();
  document.body.classList.remove("show-sidebar");
  live.follow();
  if (inspector.isOpen()) await inspector.refresh();
}

// Calls waiting for a decision get their Approve/Deny buttons after a reload too.
async function approvals(id) {
  return (await api(`/threads/${id}/approvals`)).approvals;
}

// A turn this page did not start ended (or waits): the thread is drawn again from the store.
async function redrawThread() {
  const id = state.thread?.id;
  if (!id) return;
  const [messages, waiting] = await Promise.all([allMessages(id), approvals(id)]);
  if (state.thread?.id !== id || state.streaming) return;
  chat.clearChat();
  forget();
  chat.renderAll(messages);
  waiting.forEach(chat.approvalCard);
  chat.attachSubagents(id).catch(showError);
  loadThreads().catch(showError);
}

// A new thread is named after its first message (rename it from the list).
async function nameThread(text) {
  const line = text.split("\n")[0].trim();
  const title = line.length > 60 ? `${line.slice(0, 59)}…` : line;
  const updated = await api(`/threads/${state.thread.id}`, { method: "PATCH", json: { title } });
  state.thread.title = updated.title;
  $("thread-title").textContent = titleOf(updated);
  await loadThreads();
}

async function newThread(agent = $("agent-select").value, title = undefined) {
  const thread = await api("/threads", { method: "POST", json: title ? { agent, title } : { agent } });
  await loadThreads();
  await openThread(thread.id);
  $("input").focus();
  return thread;
}

// Edit-and-resend and regenerate: a fork keeps the history before ``message``, then ``content`` is sent there.
async function resendAsFork(message, content) {
  const source = state.thread;
  const keep = chat.forkPoint(message);
  const title = `${titleOf(source)} (fork)`;
  if (keep) {
    const fork = await api(`/threads/${source.id}/fork`, { method: "POST", json: { messageId: keep, title } });
    await loadThreads();
    await openThread(fork.id);
  } else {
    await newThread(source.agent_id, title);
  }
  await chat.send(content);
}
chat.onFork(resendAsFork);
rerun.onOpenThread(async (id) => { await loadThreads(); await openThread(id); });
live.onForeignTurn(redrawThread);
onOpen(openThread);
chat.onTurnEnded(() => {
  loadThreads().catch(showError);
  if (state.thread) chat.attachSubagents(state.thread.id).catch(showError);
});

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.streaming) return;
  $("input").value = "";
  try {
    if (state.editing) {
      const message = state.editing;
      chat.cancelEdit();
      await resendAsFork(message, text);
      return;
    }
    if (!state.thread) await newThread();
    if (!state.thread.title && !state.messages.length) await nameThread(text);
    await chat.send(text);
  } catch (err) { showError(err); }
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
});
document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  if (state.streaming) chat.stop();
  else if (state.editing) chat.cancelEdit();
});
$("stop").addEventListener("click", () => chat.stop());
$("edit-cancel").addEventListener("click", () => chat.cancelEdit());
$("new-thread").addEventListener("click", () => newThread().catch(showError));
$("inspector-toggle").addEventListener("click", () => inspector.toggle());
$("inspector-close").addEventListener("click", () => inspector.toggle(false));
$("runtime-toggle").addEventListener("click", () => runtime.toggle());
$("runtime-close").addEventListener("click", () => runtime.toggle(false));
$("runtime-refresh").addEventListener("click", () => runtime.refresh().catch(showError));
$("evals-toggle").addEventListener("click", () => evals.toggle());
$("evals-close").addEventListener("click", () => evals.toggle(false));
$("evals-refresh").addEventListener("click", () => evals.refresh().catch(showError));
$("eval-capture").addEventListener("click", () => evals.captureTurn().catch(showError));
evals.onOpenThread(async (id) => { await loadThreads(); await openThread(id); inspector.toggle(true); });
$("sidebar-open").addEventListener("click", () => document.body.classList.add("show-sidebar"));
$("sidebar-close").addEventListener("click", () => document.body.classList.remove("show-sidebar"));
$("token-save").addEventListener("click", () => {
  localStorage.setItem("sa-token", $("token-input").value.trim());
  start();
});

// Theme: the system's preference unless the toggle chose one (remembered in localStorage).
function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}
$("theme-toggle").addEventListener("click", () => {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === "dark"
    : matchMedia("(prefers-color-scheme: dark)").matches;
  const next = dark ? "light" : "dark";
  localStorage.setItem("sa-theme", next);
  applyTheme(next);
});
applyTheme(localStorage.getItem("sa-theme"));
wireFilters();

async function start() {
  $("send").disabled = true;
  webhooks.checkAccess();
  try {
    showError(null);
    await loadAgents();
    await loadThreads();
    $("send").disabled = false;
  } catch (err) {
    showError(err);
    $("token-box").open = true;
  }
}
// with an identity provider, a sign-in in progress finishes before the first API call
signin.boot().catch(showError).finally(start);
