"""Names for packed packages: distribution names, module names, versions."""

from __future__ import annotations

import keyword
import re

__all__ = ["bump_patch", "dist_name_for", "identifier", "module_name_for", "parse_version"]

_NON_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def dist_name_for(agent_name: str, package_name: str | None = None) -> str:
    """``standardagent-<name>`` (underscores become dashes), or the agent's own package name."""
    if package_name:
        return package_name
    return "standardagent-" + agent_name.replace("_", "-")


def identifier(text: str) -> str:
    """A Python identifier made from ``text`` (dots, dashes and slashes become underscores)."""
    ident = _NON_IDENT.sub("_", text).strip("_").lower() or "x"
    if ident[0].isdigit() or keyword.iskeyword(ident):
        ident = "_" + ident
    return ident


def module_name_for(dist_name: str) -> str:
    """The import name of a packed distribution: ``standardagent-my-flow`` -> ``standardagent_my_flow``."""
    return identifier(dist_name.rsplit("/", 1)[-1])


def parse_version(version: str) -> tuple[int, int, int]:
    """``major.minor.patch`` as numbers (missing parts are 0; anything after them is ignored)."""
    match = re.match(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", version or "")
    if not match:
        raise ValueError(f"{version!r} is not a version (expected major.minor.patch, like 1.0.0)")
    return (int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0))


def bump_patch(version: str) -> str:
    major, minor, patch = parse_version(version)
    return f"{major}.{minor}.{patch + 1}"
