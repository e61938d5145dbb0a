// One event stream for the open thread, so the page keeps up with turns it did not start
// (another tab, an API client, a scheduled effect): when one of those ends, or waits for an
// approval, the chat is redrawn from the store; whenever any turn ends, the inspector reloads.
import { openStream, readSSE } from "./api.js";
import * as chat from "./chat.js";
import * as inspector from "./inspector.js";
import { showError, state } from "./state.js";

let following = null;   // {threadId, controller}
let redraw = async () => {};

export function onForeignTurn(fn) { redraw = fn; }

function handle(event) {
  const d = event.data || {};
  if (event.type !== "done" && event.type !== "approval.request") return;
  if (event.type === "done" && inspector.isOpen()) inspector.refresh().catch(showError);
  // this page's own turns are drawn from their own stream
  if (state.streaming || chat.own.has(d.executionId)) return;
  redraw().catch(showError);
}

export function follow() {
  const wanted = state.thread ? state.thread.id : null;
  if (following && following.threadId === wanted) return;
  if (following) following.controller.abort();
  following = null;
  if (!wanted) return;
  const controller = new AbortController();
  following = { threadId: wanted, controller };
  openStream(wanted, controller.signal)
    .then((response) => readSSE(response, handle))
    .catch((err) => { if (err.name !== "AbortError") showError(err); });
}
