"""Refresh the web app's vendored libraries from the npm registry.

The app ships inside the wheel and has no build step, so the few libraries it uses are
copied into ``src/standardagents/ui/vendor/`` (with their licence files) and committed. Run
this only to change a pinned version: ``python scripts/vendor_ui.py`` (needs ``npm``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "src" / "standardagents" / "ui" / "vendor"

#: package -> (version, folder under vendor/, {file in the package: name in that folder})
PACKAGES: dict[str, tuple[str, str, dict[str, str]]] = {
    "marked": ("18.2.1", "marked", {"lib/marked.esm.js": "marked.esm.js", "LICENSE": "LICENSE"}),
    # the minified UMD build (a third of the ES build's size) sets globalThis.DOMPurify when imported
    "dompurify": ("3.5.0", "dompurify", {"dist/purify.min.js": "purify.min.js", "LICENSE": "LICENSE"}),
    # highlight.js's core and a few languages, as ES modules the app loads only once a code block appears
    "@highlightjs/cdn-assets": ("11.12.0", "highlight", {
        "es/core.min.js": "core.min.js", "LICENSE": "LICENSE",
        **{f"es/languages/{name}.min.js": f"{name}.min.js"
           for name in ("python", "javascript", "typescript", "bash", "json", "yaml", "xml", "sql", "diff")},
    }),
}

_SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.MULTILINE)


def fetch(name: str, version: str, folder: str, files: dict[str, str], work: Path) -> None:
    out = subprocess.run(["npm", "pack", f"{name}@{version}", "--silent", "--pack-destination", str(work)],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    target = VENDOR / folder
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(work / out) as tar:
        for inner, dest in files.items():
            member = tar.extractfile(f"package/{inner}")
            if member is None:
                raise SystemExit(f"{name}@{version} has no {inner}")
            data = member.read().decode("utf-8")
            # the maps are not shipped, so browsers should not ask for them
            (target / dest).write_text(_SOURCE_MAP.sub("", data), encoding="utf-8")
    (target / "VERSION").write_text(f"{name}@{version}\n", encoding="utf-8")
    print(f"{name}@{version} -> {target}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, (version, folder, files) in PACKAGES.items():
            fetch(name, version, folder, files, Path(tmp))


if __name__ == "__main__":
    main()
