// The webhooks view: the caller's subscriptions (GET /api/webhooks; an admin sees every one),
// each with its delivery log loaded when asked for, a Replay button per delivery and a Delete
// button per subscription. The API answers any signed-in caller with its own subscriptions, so
// the toggle shows once the caller is known (GET /api/users/me, see checkAccess) and stays hidden
// otherwise. Errors from the API are written in the view rather than thrown. Drawn with
// textContent only; the module wires its own buttons.
import { api } from "./api.js";
import { $ } from "./state.js";

const panel = $("webhooks-view");
const toggleButton = $("webhooks-toggle");
const path = (id) => `/webhooks/${encodeURIComponent(id)}`;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function when(ms) { return ms ? new Date(ms).toLocaleString() : "—"; }

// An API failure is shown in the view (null clears it): the view never throws.
function showViewError(err) {
  const box = $("webhooks-error");
  box.textContent = err ? String(err.message || err) : "";
  box.hidden = !err;
}

// A button's call, then ``redraw``; the call's failure is shown after the redraw (which clears
// the error line when it succeeds).
async function act(call, redraw) {
  let failure = null;
  try { await call(); } catch (err) { failure = err; }
  await redraw();
  if (failure) showViewError(failure);
}

function button(label, name, onClick) {
  const node = el("button", "ghost", label);
  node.type = "button";
  node.dataset.action = label.toLowerCase();
  node.setAttribute("aria-label", `${label} ${name}`);
  node.addEventListener("click", onClick);
  return node;
}

function scope(w) {
  if (w.execution) return `execution ${w.execution}`;
  return w.thread ? `thread ${w.thread}` : "every thread";
}

function attemptRow(a) {
  const answer = a.statusCode ? `HTTP ${a.statusCode}` : `error: ${a.error || "no answer"}`;
  const li = el("li", "webhook-attempt", `#${a.attempt} · ${answer} · ${a.durationMs} ms · ${when(a.createdAt)}`);
  li.dataset.status = a.statusCode ? String(a.statusCode) : "error";
  return li;
}

function deliveryRow(w, d, attempts, reload) {
  const li = el("li", "webhook-delivery");
  li.dataset.delivery = d.id;
  li.dataset.status = d.status;
  const last = attempts[0];
  const lastAnswer = !last ? "not tried yet"
    : last.statusCode ? `last HTTP ${last.statusCode}` : `last error: ${last.error || "no answer"}`;
  const done = d.deliveredAt ? ` · delivered ${when(d.deliveredAt)}` : "";
  li.append(el("strong", null, d.type), el("span", "webhook-status", ` ${d.status}`),
    el("span", "runtime-muted", ` · ${d.attempts} attempts · ${lastAnswer}${d.lastError ? ` (${d.lastError})` : ""}`
      + ` · created ${when(d.createdAt)}${done}`));
  const tries = el("ol", "webhook-attempts");
  [...attempts].reverse().forEach((a) => tries.appendChild(attemptRow(a)));
  const replay = button("Replay", `delivery ${d.id}`,
    () => act(() => api(`${path(w.id)}/deliveries/${encodeURIComponent(d.id)}/replay`, { method: "POST" }), reload));
  li.append(tries, replay);
  return li;
}

// The subscription's delivery log into ``box`` (newest first, each with its attempts).
async function loadLog(w, box) {
  const reload = () => loadLog(w, box);
  let log;
  try {
    log = await api(`${path(w.id)}/deliveries`);
    showViewError(null);
  } catch (err) { showViewError(err); return; }
  const byMessage = new Map();
  log.attempts.forEach((a) => {
    if (!byMessage.has(a.messageId)) byMessage.set(a.messageId, []);
    byMessage.get(a.messageId).push(a);
  });
  const list = el("ul", "webhook-deliveries");
  log.deliveries.forEach((d) => list.appendChild(deliveryRow(w, d, byMessage.get(d.id) || [], reload)));
  if (!log.deliveries.length) list.appendChild(el("li", "runtime-empty", "no delivery yet"));
  box.replaceChildren(list, button("Reload", `the deliveries of ${w.url}`, reload));
  box.hidden = false;
}

function row(w) {
  const li = el("li", "webhook");
  li.dataset.webhook = w.id;
  li.append(el("strong", null, w.name || w.url), el("span", "runtime-muted",
    ` · ${w.events.join(", ")} · ${scope(w)} · created ${when(w.createdAt)}`));
  const log = el("div", "webhook-log");
  log.hidden = true;
  const buttons = el("div", "webhook-actions");
  buttons.append(button("Deliveries", `of ${w.url}`, () => {
    if (log.hidden) loadLog(w, log);
    else log.hidden = true;
  }));
  if (w.source !== "project") {
    buttons.append(button("Delete", `subscription ${w.url}`, async () => {
      if (!window.confirm(`Delete the subscription to ${w.url}? Its pending deliveries are not sent.`)) return;
      await act(() => api(path(w.id), { method: "DELETE" }), refresh);
    }));
  }
  li.append(buttons, log);
  return li;
}

export async function refresh() {
  let webhooks;
  try {
    ({ webhooks } = await api("/webhooks"));
    showViewError(null);
  } catch (err) { showViewError(err); return; }
  const list = el("ul", "webhooks");
  webhooks.forEach((w) => list.appendChild(row(w)));
  if (!webhooks.length) list.appendChild(el("li", "runtime-empty", "no subscription: POST /api/webhooks or define_webhook"));
  $("webhooks-list").replaceChildren(list);
}

export function toggle(open = panel.hidden) {
  panel.hidden = !open;
  toggleButton.setAttribute("aria-pressed", String(open));
  if (open) refresh();
}

// The toggle shows for a caller the API knows; without credentials it stays hidden. The page
// calls this whenever its credentials may have changed (start-up, sign-in, a saved token).
export async function checkAccess() {
  try {
    await api("/users/me");
    toggleButton.hidden = false;
  } catch (_) {
    toggleButton.hidden = true;
    toggle(false);
  }
}

toggleButton.addEventListener("click", () => toggle());
$("webhooks-close").addEventListener("click", () => toggle(false));
$("webhooks-refresh").addEventListener("click", () => refresh());
