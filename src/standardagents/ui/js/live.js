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
  if (wanted) listen({ threadId: wanted, controller: new AbortController(), tries: 0 });
}

// A stream that ends (the server restarted, the network dropped) is opened again after a
// growing pause; what happened meanwhile is then read from the store.
async function listen(feed) {
  following = feed;
  try {
    const response = await openStream(feed.threadId, feed.controller.signal);
    if (!response.ok) throw new Error(`${response.status}`);
    if (feed.tries > 0 && !state.streaming) redraw().catch(showError);
    feed.tries = 0;
    await readSSE(response, handle);
  } catch (err) {
    if (err.name === "AbortError") return;
  }
  if (following !== feed || feed.controller.signal.aborted) return;
  feed.tries += 1;
  setTimeout(() => { if (following === feed) listen(feed); }, Math.min(30_000, 1000 * 2 ** Math.min(feed.tries, 5)));
}
