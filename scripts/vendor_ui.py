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

#: package -> (version, {file in the package: name under vendor/<package>/})
PACKAGES: dict[str, tuple[str, dict[str, str]]] = {
    "marked": ("18.2.1", {"lib/marked.esm.js": "marked.esm.js", "LICENSE": "LICENSE"}),
    # the minified UMD build (a third of the ES build's size) sets globalThis.DOMPurify when imported
    "dompurify": ("3.5.0", {"dist/purify.min.js": "purify.min.js", "LICENSE": "LICENSE"}),
}

_SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.MULTILINE)


def fetch(name: str, version: str, files: dict[str, str], work: Path) -> None:
    out = subprocess.run(["npm", "pack", f"{name}@{version}", "--silent", "--pack-destination", str(work)],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    target = VENDOR / name
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
        for name, (version, files) in PACKAGES.items():
            fetch(name, version, files, Path(tmp))


if __name__ == "__main__":
    main()
