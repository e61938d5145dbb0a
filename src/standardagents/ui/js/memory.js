// The memory view: search long-term memory (POST /api/store/items/search, by meaning with a
// query), see each item's namespace, key, value and score, edit its value as JSON (PUT) and
// delete it (DELETE) so the agent forgets it. Drawn with textContent only. A person who is
// not an admin sees their own memory (the server binds namespaces to the caller).
import { api } from "./api.js";
import { $, showError } from "./state.js";

const panel = $("memory-view");

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function prefixOf() {
  const text = $("memory-prefix").value.trim();
  return text ? text.split(".") : [];
}

function button(label, item, run) {
  const b = el("button", "ghost", label);
  b.type = "button";
  b.dataset.action = label.toLowerCase();
  b.setAttribute("aria-label", `${label} memory ${item.namespace.join(".")} ${item.key}`);
  b.addEventListener("click", () => run().catch(showError));
  return b;
}

function editor(li, item) {
  const area = el("textarea", "memory-edit");
  area.value = JSON.stringify(item.value, null, 2);
  area.setAttribute("aria-label", `Value of ${item.key}`);
  const save = button("Save", item, async () => {
    let value;
    try { value = JSON.parse(area.value); } catch (e) { throw new Error(`the value is not JSON: ${e.message}`); }
    await api("/store/items", { method: "PUT", json: { namespace: item.namespace, key: item.key, value } });
    await refresh();
  });
  li.append(area, save);
  area.focus();
}

function row(item) {
  const li = el("li", "memory-item");
  li.dataset.key = item.key;
  li.dataset.namespace = item.namespace.join(".");
  const head = el("div", "memory-head");
  head.append(el("strong", null, item.key), el("span", "runtime-muted", ` · ${item.namespace.join(".")}`));
  if (item.score !== undefined && item.score !== null) head.append(el("span", "memory-score", ` · score ${item.score.toFixed(3)}`));
  li.append(head, el("pre", "memory-value", JSON.stringify(item.value)));
  const when = el("div", "runtime-muted", `updated ${new Date(item.updated_at).toLocaleString()}`);
  const actions = el("div", "memory-actions");
  actions.append(
    button("Edit", item, async () => { if (!li.querySelector("textarea")) editor(li, item); }),
    button("Delete", item, async () => {
      await api("/store/items", { method: "DELETE", json: { namespace: item.namespace, key: item.key } });
      await refresh();
    }));
  li.append(when, actions);
  return li;
}

export async function refresh() {
  const query = $("memory-query").value.trim();
  const body = { namespace_prefix: prefixOf(), limit: 50 };
  if (query) body.query = query;
  const { items } = await api("/store/items/search", { method: "POST", json: body });
  const list = el("ul", "memory-items");
  items.forEach((item) => list.appendChild(row(item)));
  if (!items.length) list.appendChild(el("li", "runtime-empty", query ? "nothing matches" : "no memory yet"));
  $("memory-list").replaceChildren(list);
}

export function toggle(open = panel.hidden) {
  panel.hidden = !open;
  $("memory-toggle").setAttribute("aria-pressed", String(open));
  if (open) refresh().catch(showError);
}

$("memory-toggle").addEventListener("click", () => toggle());
$("memory-close").addEventListener("click", () => toggle(false));
$("memory-search").addEventListener("submit", (event) => { event.preventDefault(); refresh().catch(showError); });
