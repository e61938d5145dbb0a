"""Checks that packed code keeps to the public ``standardagents`` surface.

A package must run on any conforming runtime, so its definitions may not reach into the
engine, the store, the server, or anything private; these checks read the source and warn.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .discover import PackageInfo, load_package_dir

__all__ = ["PRIVATE_MODULES", "validate_packed"]

#: modules of ``standardagents`` that are runtime internals, not the packable surface
PRIVATE_MODULES = ("standardagents.engine", "standardagents.store", "standardagents.server")
_PRIVATE_SUBMODULES = {m.rsplit(".", 1)[1] for m in PRIVATE_MODULES}


def _private_module(name: str) -> bool:
    if name != "standardagents" and not name.startswith("standardagents."):
        return False
    if any(name == m or name.startswith(m + ".") for m in PRIVATE_MODULES):
        return True
    return any(part.startswith("_") for part in name.split(".")[1:])


def _problems_in(path: Path, label: str) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError) as exc:
        return [f"{label}: cannot be read: {exc}"]
    out: list[str] = []
    aliases: set[str] = set()
    for node in ast.walk(tree):
        where = f"{label}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private_module(alias.name):
                    out.append(f"{where}: imports {alias.name}, a private runtime surface; use the public standardagents API")
                elif alias.name == "standardagents":
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _private_module(node.module):
                out.append(f"{where}: imports from {node.module}, a private runtime surface; use the public standardagents API")
                continue
            if node.module != "standardagents" and not node.module.startswith("standardagents."):
                continue
            for alias in node.names:
                if alias.name.startswith("_"):
                    out.append(f"{where}: imports the private name {alias.name} from {node.module}")
                elif node.module == "standardagents" and alias.name in _PRIVATE_SUBMODULES:
                    out.append(f"{where}: imports standardagents.{alias.name}, a private runtime surface; use the public standardagents API")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") or node.attr in _PRIVATE_SUBMODULES:
                out.append(f"{where}: uses standardagents.{node.attr}, a private runtime surface")
    return out


def validate_packed(package: PackageInfo | str | Path) -> list[str]:
    """Warnings for packed definitions that reach a private runtime surface (empty when clean).

    ``package`` is a discovered package, or a packed module or distribution folder.
    """
    info = package if isinstance(package, PackageInfo) else load_package_dir(package)
    origin = getattr(info.module, "__file__", None)
    if origin is None:
        return [f"package {info.package_id}: its module has no file to check"]
    module_dir = Path(origin).parent
    warnings: list[str] = []
    for path in sorted(module_dir.rglob("*.py")):
        warnings += _problems_in(path, f"{info.package_id}/{path.relative_to(module_dir).as_posix()}")
    return warnings
