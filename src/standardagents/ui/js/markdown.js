// Markdown for model and user text: parsed by marked, then sanitized by DOMPurify, so no HTML
// or script from a model or a user ever reaches the page; code blocks get a copy button.
import { marked } from "../vendor/marked/marked.esm.js";
import "../vendor/dompurify/purify.min.js";   // a UMD build: it defines globalThis.DOMPurify

const DOMPurify = globalThis.DOMPurify;

marked.use({ gfm: true, breaks: true });

// Images are dropped: a model could be steered into leaking data through an image URL.
const PURIFY = {
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "iframe", "svg", "math"],
  FORBID_ATTR: ["style", "class", "id"],
  ALLOW_DATA_ATTR: false,
};

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
  }
}

async function copyText(text, button) {
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
