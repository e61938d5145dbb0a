"""The distributions ``src/`` imports are the ones ``pyproject.toml`` declares."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_modules() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "src" / "standardagents").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n != "standardagents" and n not in sys.stdlib_module_names}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def names(specs: list[str]) -> set[str]:
        return {_normal(re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]) for spec in specs}

    extras = {name for key, specs in project["optional-dependencies"].items() if key != "dev" for name in names(specs)}
    return names(project["dependencies"]), extras


def test_every_imported_distribution_is_declared() -> None:
    core, extras = _declared()
    owners = packages_distributions()
    missing = {}
    for module in sorted(_imported_modules()):
        dists = {_normal(d) for d in owners.get(module, [module])}
        if not dists & (core | extras):
            missing[module] = sorted(dists)
    assert missing == {}, f"imported by src/ but not declared in pyproject.toml: {missing}"


def _importers(module: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "src" / "standardagents").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            if any(n.split(".")[0] == module for n in names):
                found.add(path.relative_to(ROOT / "src").as_posix())
    return found


def test_the_http_client_declared_is_the_one_imported() -> None:
    core, _extras = _declared()
    imported = _imported_modules()
    assert "httpx2" in imported and "httpx2" in core
    # the first-generation client is not a core dependency: only the A2A client, which takes
    # an httpx client, uses it, and the a2a extra brings it
    assert "httpx" not in core
    assert _importers("httpx") <= {"standardagents/a2a_agents.py"}
    a2a = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]["a2a"]
    assert any(_normal(re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]) == "httpx" for spec in a2a)
