// The server's REST API and its event streams: one place that knows URLs, the token and SSE.
export const API = document.querySelector('meta[name="sa-api-prefix"]').content || "/api";

export function headers(extra = {}) {
  const token = localStorage.getItem("sa-token");
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
  return new Error(message);
}

export async function api(path, options = {}) {
  const init = { ...options, headers: headers(options.headers || {}) };
  if (options.json !== undefined) {
    init.body = JSON.stringify(options.json);
    init.headers["Content-Type"] = "application/json";
    delete init.json;
  }
  const response = await fetch(API + path, init);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

// POST a message and answer the streaming response (SSE), so the caller reads the turn live.
export async function sendStreaming(threadId, content, signal) {
  const response = await fetch(`${API}/threads/${threadId}/messages?stream=true`, {
    method: "POST", signal, headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify({ content }),
  });
  if (!response.ok) throw await failure(response);
  return response;
}

export function openStream(threadId, signal) {
  return fetch(`${API}/threads/${threadId}/stream`, { headers: headers(), signal });
}

// Reads an SSE body from fetch (so the Authorization header can be sent) and dispatches events.
export async function readSSE(response, handle) {
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
