// Markdown for model and user text: parsed by marked, then sanitized by DOMPurify, so no HTML
// or script from a model or a user ever reaches the page; code blocks get a copy button.
import { marked } from "../vendor/marked/marked.esm.js";
import "../vendor/dompurify/purify.min.js";   // a UMD build: it defines globalThis.DOMPurify

const DOMPurify = globalThis.DOMPurify;

marked.use({ gfm: true, breaks: true });

// Images are dropped: a model could be steered into leaking data through an image URL.
const PURIFY = {
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "iframe", "svg", "math"],
  FORBID_ATTR: ["style", "id"],
  ALLOW_DATA_ATTR: false,
};

// Classes only name a code block's language (for highlighting); none else survives.
DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
  if (data.attrName === "class" && !(node.tagName === "CODE" && /^language-[\w+-]+$/.test(data.attrValue))) {
    data.keepAttr = false;
  }
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer"); }
});

export function renderMarkdown(el, text) {
  el.innerHTML = DOMPurify.sanitize(marked.parse(text || ""), PURIFY);
  for (const pre of el.querySelectorAll("pre")) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-code";
    button.setAttribute("aria-label", "Copy code");
    button.addEventListener("click", () => copyText(pre.querySelector("code")?.textContent ?? pre.textContent, button));
    pre.appendChild(button);
    const code = pre.querySelector("code[class^='language-']");
    if (code) highlight(code, code.className.slice("language-".length).toLowerCase()).catch(() => {});
  }
}

// highlight.js and each language are loaded the first time a block needs them.
const LANGUAGES = {
  python: "python", py: "python", javascript: "javascript", js: "javascript", typescript: "typescript",
  ts: "typescript", bash: "bash", sh: "bash", shell: "bash", console: "bash", json: "json", yaml: "yaml",
  yml: "yaml", html: "xml", xml: "xml", svg: "xml", sql: "sql", diff: "diff", patch: "diff",
};
let core = null;
const grammars = new Map();

async function highlight(code, lang) {
  const name = LANGUAGES[lang];
  if (!name) return;
  core ??= import("../vendor/highlight/core.min.js").then((m) => {
    m.default.configure({ ignoreUnescapedHTML: true });
    return m.default;
  });
  const hljs = await core;
  if (!grammars.has(name)) {
    grammars.set(name, import(`../vendor/highlight/${name}.min.js`).then((m) => hljs.registerLanguage(name, m.default)));
  }
  await grammars.get(name);
  queue.push(code);
  if (queue.length === 1) idle(drain);
  function drain(deadline) {
    // a long thread's blocks are coloured in idle time, never holding up drawing or typing
    do {   // at least one block per call, so a busy page still gets there
      const next = queue.shift();
      if (next.isConnected && !next.dataset.highlighted) hljs.highlightElement(next);
    } while (queue.length && deadline.timeRemaining() > 1);
    if (queue.length) idle(drain);
  }
}

const queue = [];
const idle = window.requestIdleCallback
  ? (fn) => window.requestIdleCallback(fn, { timeout: 500 })
  : (fn) => setTimeout(() => fn({ timeRemaining: () => 8 }), 16);

export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) {
    const area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.dataset.copied = "true";
  setTimeout(() => { delete button.dataset.copied; }, 1500);
}
