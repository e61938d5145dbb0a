// The runtime view: each agent's sides (prompt, model, tools with their origin, hooks) and
// what runs now: executions, calls waiting for approval, pending effects, recent failures.
// Read from GET /api/runtime (admins; dev serves a local admin), drawn with textContent only.
import { api } from "./api.js";
import { $, showError } from "./state.js";

const panel = $("runtime-view");

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function section(title, items, describe, empty) {
  const box = el("section", "runtime-section");
  box.dataset.section = title.toLowerCase();
  box.appendChild(el("h3", null, `${title} (${items.length})`));
  const list = el("ul");
  for (const item of items) list.appendChild(describe(item));
  if (!items.length) list.appendChild(el("li", "runtime-empty", empty));
  box.appendChild(list);
  return box;
}

function agentCard(agent) {
  const li = el("li", "runtime-agent");
  li.dataset.agent = agent.name;
  li.appendChild(el("h4", null, `${agent.name} · ${agent.type}${agent.primary ? "" : " · not primary"}`));
  if (agent.description) li.appendChild(el("p", "runtime-muted", agent.description));
  for (const side of agent.sides) {
    const box = el("div", "runtime-side");
    box.dataset.side = side.side;
    if (side.error) { box.appendChild(el("p", "runtime-error", `side ${side.side}: ${side.error}`)); li.appendChild(box); continue; }
    const model = side.model;
    box.appendChild(el("div", "runtime-line", `side ${side.side} · prompt ${side.prompt.name} · model ${model.name} (${model.provider} ${model.model})`
      + (model.fallbacks.length ? ` · fallbacks ${model.fallbacks.join(", ")}` : "")));
    const text = typeof side.prompt.text === "string" ? side.prompt.text : JSON.stringify(side.prompt.text);
    box.appendChild(el("pre", "runtime-prompt", text || "(no prompt text)"));
    const tools = el("ul", "runtime-tools");
    for (const t of side.tools) {
      const item = el("li", "runtime-tool");
      item.dataset.tool = t.name;
      item.append(el("code", null, t.name), el("span", "runtime-muted",
        ` ${t.describedOrigin}${t.session ? ` · session ${t.session}` : ""}${t.needsApproval ? " · needs approval" : ""}`));
      tools.appendChild(item);
    }
    if (!side.tools.length) tools.appendChild(el("li", "runtime-empty", "no tools"));
    box.appendChild(tools);
    const hooks = side.hooks.map((h) => `${h.hook} (${h.id})`).join(", ");
    box.appendChild(el("div", "runtime-line runtime-hooks", hooks ? `hooks: ${hooks}` : "no hooks"));
    li.appendChild(box);
  }
  return li;
}

function when(ms) { return new Date(ms).toLocaleString(); }

function execution(e) {
  const li = el("li", "runtime-execution", `${e.id} · thread ${e.threadId} · side ${e.side} · ${e.steps} steps · since ${when(e.createdAt)}`);
  if (e.error) li.appendChild(el("div", "runtime-error", e.error));
  return li;
}

function approval(a) {
  const li = el("li", "runtime-approval", `${a.tool} ${JSON.stringify(a.arguments)} · thread ${a.threadId}`);
  li.dataset.tool = a.tool;
  return li;
}

function effect(e) {
  return el("li", "runtime-effect", `${e.name} · thread ${e.threadId} · at ${when(e.runAt)} · ${e.attempts} attempts`);
}

export async function refresh() {
  const data = await api("/runtime");
  const body = $("runtime-body");
  body.replaceChildren(
    section("Agents", data.agents, agentCard, "no agents"),
    section("Running", data.running, execution, "nothing runs"),
    section("Approvals", data.approvals, approval, "no call waits for a decision"),
    section("Effects", data.effects, effect, "no effect is scheduled"),
    section("Errors", data.errors, execution, "no failed execution"),
  );
}

export function isOpen() { return !panel.hidden; }

export function toggle(open = panel.hidden) {
  panel.hidden = !open;
  $("runtime-toggle").setAttribute("aria-pressed", String(open));
  if (open) refresh().catch(showError);
}
