"""Unpacking: turn a packed package back into editable project files.

The package's source files go back where a project keeps them, and the entry agent is given
the package's name and the next patch version, so packing it again makes the same package,
one version on. The packed module is read, never imported.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from ..exceptions import ProjectError
from .naming import bump_patch, module_name_for
from .pack import EXPORT_KINDS, EXTRA_KINDS

__all__ = ["read_packed_module", "set_agent_fields", "unpack"]

_FOLDER = {"agents": "agents", "prompts": "prompts", "tools": "tools", "models": "models", "hooks": "hooks",
           "effects": "effects", "providers": "providers"}


def _module_dir_of(dist_or_dir: str | Path, scratch: Path) -> Path:
    from .discover import _module_dir

    path = Path(dist_or_dir)
    if path.is_file() and path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            wheel.extractall(scratch)
        found = _module_dir(scratch)
        if found is None:
            raise ProjectError([(str(path), "this wheel holds no packed agent module")])
        return found
    if path.is_dir():
        found = _module_dir(path)
        if found is None:
            raise ProjectError([(str(path), "no packed module here (expected an __init__.py exporting __meta)")])
        return found
    spec = importlib.util.find_spec(module_name_for(str(dist_or_dir)))
    if spec is not None and spec.origin:
        return Path(spec.origin).parent
    raise ProjectError([(str(dist_or_dir), "is not a wheel, a packed folder or an installed packed distribution")])


def read_packed_module(module_dir: Path) -> dict[str, Any]:
    """``__meta``, ``_sources`` and each registry's ``name -> module`` map, read from the source."""
    tree = ast.parse((module_dir / "__init__.py").read_text(encoding="utf-8"))
    out: dict[str, Any] = {"registries": {}}
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if not isinstance(target, ast.Name) or value is None:
            continue
        if target.id in ("__meta", "_sources"):
            out[target.id] = ast.literal_eval(value)
        elif target.id in (*EXPORT_KINDS, *EXTRA_KINDS) and isinstance(value, ast.Dict):
            table: dict[str, str] = {}
            for key, call in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(call, ast.Call) and len(call.args) >= 2:
                    module = call.args[1]
                    if isinstance(module, ast.Constant):
                        table[str(key.value)] = str(module.value)
            out["registries"][target.id] = table
    if "__meta" not in out:
        raise ProjectError([(str(module_dir), "is not a packed agent module: it has no __meta")])
    return out


def _offset(lines: list[str], lineno: int, col: int) -> int:
    line = lines[lineno - 1]
    return sum(len(x) for x in lines[: lineno - 1]) + len(line.encode("utf-8")[:col].decode("utf-8"))


def _call_name(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    if call.args and isinstance(call.args[0], ast.Dict):
        for key, value in zip(call.args[0].keys, call.args[0].values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "name" and isinstance(value, ast.Constant):
                return str(value.value)
    return None


def set_agent_fields(text: str, agent: str, fields: dict[str, str]) -> str:
    """Set string fields on the ``define_agent(...)`` call for ``agent`` in a source file."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and ((isinstance(n.func, ast.Name) and n.func.id == "define_agent")
                  or (isinstance(n.func, ast.Attribute) and n.func.attr == "define_agent"))]
    call = next((c for c in calls if _call_name(c) == agent), calls[0] if len(calls) == 1 else None)
    if call is None:
        raise ProjectError([(f"agent {agent!r}", "cannot find its define_agent(...) call to record the package name")])
    camel = {"package_name": "packageName", "version": "version"}
    edits: list[tuple[int, int, str]] = []
    missing: list[str] = []
    for field, value in fields.items():
        literal = json.dumps(value)
        node: ast.expr | None = next((kw.value for kw in call.keywords if kw.arg in (field, camel.get(field))), None)
        if node is None and call.args and isinstance(call.args[0], ast.Dict):
            d = call.args[0]
            node = next((v for k, v in zip(d.keys, d.values, strict=True)
                         if isinstance(k, ast.Constant) and k.value in (field, camel.get(field))), None)
        if node is not None and node.end_lineno is not None and node.end_col_offset is not None:
            edits.append((_offset(lines, node.lineno, node.col_offset), _offset(lines, node.end_lineno, node.end_col_offset), literal))
        else:
            missing.append(f"{field}={literal}")
    if missing:
        last: ast.keyword | ast.expr | None = call.keywords[-1] if call.keywords else (call.args[-1] if call.args else None)
        if last is not None and last.end_lineno is not None and last.end_col_offset is not None:
            at = _offset(lines, last.end_lineno, last.end_col_offset)
            edits.append((at, at, ", " + ", ".join(missing)))
        else:
            at = _offset(lines, call.func.end_lineno or call.lineno, call.func.end_col_offset or 0) + 1
            edits.append((at, at, ", ".join(missing)))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _target_for(kind: str, module: str, name: str, sources: dict[str, str]) -> str:
    known = sources.get(f"{kind}/{module}")
    if known:
        return known
    if kind in ("thread_endpoints", "user_endpoints"):
        return f"agents/api/{name}.py"
    return f"agents/{_FOLDER[kind]}/{module}.py"


def unpack(dist_or_dir: str | Path, into: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write a packed package's definitions into the project ``into`` as editable files.

    ``dist_or_dir`` is a wheel, a packed distribution or module folder, or the name of an
    installed packed distribution. Files that exist with other content are refused (all are
    listed) unless ``overwrite``. Returns the files written.
    """
    project = Path(into).resolve()
    with tempfile.TemporaryDirectory(prefix="sa-unpack-") as tmp:
        module_dir = _module_dir_of(dist_or_dir, Path(tmp))
        packed = read_packed_module(module_dir)
        meta: dict[str, Any] = packed["__meta"]
        sources: dict[str, str] = packed.get("_sources", {})
        planned: dict[Path, str] = {}
        agent_files: dict[str, Path] = {}
        for kind, table in packed["registries"].items():
            for name, module in table.items():
                rel = _target_for(kind, module, name, sources)
                src = module_dir / "definitions" / kind / f"{module}.py"
                if not src.is_file():
                    raise ProjectError([(str(src), f"the packed file for {kind[:-1]} {name!r} is missing")])
                planned[project / rel] = src.read_text(encoding="utf-8")
                if kind == "agents":
                    agent_files[name] = project / rel
        identity = {"package_name": str(meta["packageId"]), "version": bump_patch(str(meta["version"]))}
        for agent in meta.get("entryAgents", []):
            path = agent_files.get(agent)
            if path is not None:
                planned[path] = set_agent_fields(planned[path], agent, identity)
    clashes = [p for p, text in planned.items() if p.exists() and p.read_text(encoding="utf-8") != text]
    if clashes and not overwrite:
        raise ProjectError([(str(p.relative_to(project)), "already exists with other content (pass overwrite to replace it)")
                            for p in sorted(clashes)], source=str(project))
    for path, text in sorted(planned.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return sorted(planned)
