// The thread list: search by title, filter by agent and status, rename, delete, open.
import { api } from "./api.js";
import { $, showError, state } from "./state.js";

const list = $("thread-list");
let threads = [];
let opener = async () => {};

export function onOpen(fn) { opener = fn; }

export function titleOf(t) {
  return t.title || `${t.agent_id} · ${new Date(t.created_at).toLocaleString()}`;
}

export async function loadThreads() {
  const agent = $("filter-agent").value;
  const query = agent ? `&agent=${encodeURIComponent(agent)}` : "";
  threads = (await api(`/threads?limit=200&top_level=true${query}`)).threads;
  draw();
}

function visible(t) {
  const words = $("thread-search").value.trim().toLowerCase();
  const status = $("filter-status").value;
  if (words && !titleOf(t).toLowerCase().includes(words)) return false;
  if (status === "running" && !t.running) return false;
  if (status === "idle" && t.running) return false;
  return true;
}

function button(cls, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = `icon ${cls}`;
  b.setAttribute("aria-label", label);
  b.title = label;
  b.addEventListener("click", (e) => { e.stopPropagation(); onClick().catch(showError); });
  return b;
}

function draw() {
  list.replaceChildren();
  for (const t of threads.filter(visible)) {
    const li = document.createElement("li");
    li.dataset.threadId = t.id;
    li.classList.toggle("active", t.id === state.thread?.id);
    const name = document.createElement("button");
    name.type = "button";
    name.className = "thread-name";
    name.textContent = titleOf(t);
    name.addEventListener("click", () => opener(t.id).catch(showError));
    li.append(name, button("rename", `Rename ${titleOf(t)}`, () => rename(t, li)),
      button("delete", `Delete ${titleOf(t)}`, () => remove(t)));
    if (t.running) li.dataset.running = "true";
    list.appendChild(li);
  }
}

export function markActive() {
  for (const li of list.children) li.classList.toggle("active", li.dataset.threadId === state.thread?.id);
}

// An inline field: Enter saves through PATCH /threads/{id}, Escape gives up.
async function rename(t, li) {
  const field = document.createElement("input");
  field.className = "rename-field";
  field.value = t.title || "";
  field.setAttribute("aria-label", "New title");
  li.querySelector(".thread-name").replaceWith(field);
  field.focus();
  field.addEventListener("keydown", async (e) => {
    if (e.key === "Escape") { e.stopPropagation(); draw(); return; }
    if (e.key !== "Enter") return;
    e.preventDefault();
    try {
      const updated = await api(`/threads/${t.id}`, { method: "PATCH", json: { title: field.value } });
      Object.assign(t, updated);
      if (state.thread?.id === t.id) { state.thread.title = updated.title; $("thread-title").textContent = titleOf(updated); }
    } catch (err) { showError(err); }
    draw();
  });
}

async function remove(t) {
  if (!window.confirm(`Delete the thread "${titleOf(t)}"?`)) return;
  await api(`/threads/${t.id}`, { method: "DELETE" });
  threads = threads.filter((x) => x.id !== t.id);
  if (state.thread?.id === t.id) await opener(null);
  draw();
}

export function wireFilters() {
  $("thread-search").addEventListener("input", draw);
  $("filter-status").addEventListener("change", draw);
  $("filter-agent").addEventListener("change", () => loadThreads().catch(showError));
}
