// Re-run a model step with another model and/or an edited system prompt, as a new branch:
// POST /executions/{id}/steps/{n}/rerun makes a new thread holding what that step was sent and
// runs its next turn with the choices; the original thread is left as it was. The dialog waits
// for that turn to end, then the branch opens, headed by a link back to the step it re-ran.
// Choosing the model or the prompt is offered only to a caller the server lets choose them
// (the execution's rerunOverrides: an admin, a dev server, or an agent that allows it); anyone
// else re-runs the step as it was.
import { api } from "./api.js";
import { $, showError, state } from "./state.js";

const dialog = $("rerun-dialog");
const choices = $("rerun-choices");
const modelSelect = $("rerun-model");
const modelName = $("rerun-model-name");
const systemBox = $("rerun-system");
const note = $("rerun-note");
const failure = $("rerun-error");
let opener = async () => {};
let pending = null;   // {execution, step, prompt, free}: what the open dialog re-runs, and whether it may choose

export function onOpenThread(fn) { opener = fn; }

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

// The models to choose from and the side's prompt text come from the runtime view (admins);
// without it, a model is named by hand and the prompt starts empty (empty: left unchanged).
async function runtimeView() {
  try { return await api("/runtime"); } catch (_) { return null; }
}

// Whether the caller may choose the model and prompt of a re-run of this execution's steps.
export function mayChoose(execution) { return execution?.rerunOverrides === true; }

export async function open(execution, step) {
  const free = mayChoose(execution);
  const view = free ? await runtimeView() : null;
  const thread = state.thread;
  choices.hidden = !free;
  modelSelect.replaceChildren(option("", `Same model (${step.model || "the side's"})`));
  for (const m of view?.models || []) {
    if (!m.error) modelSelect.append(option(m.name, `${m.name} · ${m.provider} ${m.model}`));
  }
  modelSelect.hidden = !view;
  modelName.hidden = Boolean(view);
  modelName.value = "";
  const agent = (view?.agents || []).find((a) => a.name === thread?.agent_id);
  const side = agent?.sides.find((s) => s.side === (step.side || "a"));
  const prompt = typeof side?.prompt?.text === "string" ? side.prompt.text : "";
  systemBox.value = prompt;
  systemBox.placeholder = prompt ? "" : "The side's system prompt (leave empty to keep it)";
  note.textContent = `Step ${step.index + 1} was sent ${step.sent?.count ?? "its"} messages by ${step.model || "its model"}. `
    + (free ? "They are copied to a new thread, whose next turn runs with your choices; this thread stays as it is."
      : "They are copied to a new thread, whose next turn runs them again with the same model and system prompt "
        + "(choosing others is for admins here); this thread stays as it is.");
  failure.hidden = true;
  $("rerun-run").disabled = false;
  pending = { execution, step, prompt, free };
  dialog.showModal();
}

async function run() {
  const { execution, step, prompt, free } = pending;
  const body = {};
  const model = modelSelect.hidden ? modelName.value.trim() : modelSelect.value;
  if (free && model) body.model = model;
  if (free && systemBox.value !== prompt && (prompt || systemBox.value.trim())) body.system = systemBox.value;
  $("rerun-run").disabled = true;
  $("rerun-run").textContent = "Running…";
  try {
    const made = await api(`/executions/${execution.id}/steps/${step.index}/rerun?wait=true`, { method: "POST", json: body });
    dialog.close();
    await opener(made.thread.id);
  } catch (err) {
    failure.textContent = String(err.message || err);
    failure.hidden = false;
    $("rerun-run").disabled = false;
  } finally {
    $("rerun-run").textContent = "Run as a new branch";
  }
}

$("rerun-form").addEventListener("submit", (e) => { e.preventDefault(); run().catch(showError); });
$("rerun-cancel").addEventListener("click", () => dialog.close());

// The banner over a branch made by a re-run: which step of which thread it re-ran, and how.
export function describeBranch(thread) {
  const box = $("branch-of");
  const of = thread?.metadata?.rerunOf;
  box.replaceChildren();
  box.hidden = !of;
  if (!of) return;
  const how = [of.model ? `model ${of.model}` : null, of.systemChanged ? "an edited system prompt" : null]
    .filter(Boolean).join(" and ");
  const back = document.createElement("button");
  back.type = "button";
  back.className = "linkish";
  back.textContent = of.threadTitle || of.threadId;
  back.addEventListener("click", () => opener(of.threadId).catch(showError));
  box.append(`Re-run of step ${of.step + 1} of `, back, how ? ` with ${how}` : " as it was");
}
