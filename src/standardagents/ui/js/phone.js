// Narrow screens: the composer's placeholder fits on one line, and the thread drawer dims what
// is behind it; a tap on the dimmed part closes it.
import { $ } from "./state.js";

const narrow = window.matchMedia("(max-width: 760px)");
const input = $("input");
const wide = input.placeholder;

function fit() { input.placeholder = narrow.matches ? "Write a message…" : wide; }
fit();
narrow.addEventListener("change", fit);

document.body.addEventListener("click", (event) => {
  if (event.target === document.body && document.body.classList.contains("show-sidebar")) {
    document.body.classList.remove("show-sidebar");
  }
});
