// What the open page knows: the open thread, its messages, and the turn being streamed.
export const $ = (id) => document.getElementById(id);

export const state = {
  thread: null,            // the open thread (as the API answers it)
  agents: [],              // GET /agents
  sideLabels: new Map(),   // agent name -> {a: label, b: label}
  messages: [],            // the open thread's messages, in order (from the API and live events)
  streaming: null,         // AbortController of the reply being streamed
  editing: null,           // the user message being edited (sending forks the thread)
};

export function showError(err) {
  const el = $("error");
  el.textContent = err ? String(err.message || err) : "";
  el.hidden = !err;
}

const positions = new Map();  // message id -> index in state.messages

export function forget() {
  state.messages = [];
  positions.clear();
}

export function remember(message) {
  const at = positions.get(message.id);
  if (at !== undefined) state.messages[at] = { ...state.messages[at], ...message };
  else { positions.set(message.id, state.messages.length); state.messages.push(message); }
}

export function positionOf(id) { return positions.get(id) ?? -1; }
