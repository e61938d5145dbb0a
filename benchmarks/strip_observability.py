"""A copy of the source tree with the engine's observability call sites removed: the
baseline that tells what tracing *off* costs, since it differs from this tree in nothing else.

The engine reaches observability only through ``observe.*`` (``from .. import observability
as observe``). In every engine module, the copy drops those calls: ``if observe.observed:``
keeps only its branch for "nothing observed", a ``with observe.x(...) as
probe:`` block becomes its body (and the calls that hand ``probe`` something go too), a bare
``observe.x(...)`` statement goes, ``await observe.run_execution(e)`` becomes
``await e.run()``, ``**observe.carried_context()`` leaves its dict, and any other
``observe.x(...)`` value becomes ``{}``. A reference the rules do not cover stops the copy
with its place, rather than leaving part of the layer in the baseline.

Usage: ``python benchmarks/strip_observability.py SRC_DIR OUT_DIR`` (``SRC_DIR``: the
folder holding ``standardagents``); the copy's ``standardagents`` imports as usual from
``OUT_DIR``.
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

ALIAS = "observe"


def _observe_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == ALIAS)


def _observed_test(node: ast.expr) -> bool | None:
    """For ``observe.x`` (True) or ``not observe.x`` (False) as an ``if`` test; None otherwise."""
    negated = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    if negated:
        assert isinstance(node, ast.UnaryOp)
        node = node.operand
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == ALIAS:
        return not negated
    return None


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


class _Strip(ast.NodeTransformer):
    def __init__(self) -> None:
        self.probes: set[str] = set()

    def _body(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            if isinstance(statement, ast.If) and (observed := _observed_test(statement.test)) is not None:
                taken = statement.orelse if observed else statement.body
                out.extend(self._body(taken) if taken else [])
                continue
            if isinstance(statement, ast.With | ast.AsyncWith) and all(
                    _observe_call(item.context_expr) for item in statement.items):
                outer = self.probes
                self.probes = outer | {item.optional_vars.id for item in statement.items
                                       if isinstance(item.optional_vars, ast.Name)}
                out.extend(self._body(statement.body))
                self.probes = outer
                continue
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and (
                    _observe_call(statement.value) or _mentions(statement.value, self.probes)):
                continue
            visited = self.visit(statement)
            out.extend(visited if isinstance(visited, list) else [visited])
        return out or [ast.Pass()]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                setattr(node, field, self._body(statements))
        for handler in getattr(node, "handlers", ()):
            handler.body = self._body(handler.body)
        for case in getattr(node, "cases", ()):
            case.body = self._body(case.body)
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "finalbody", "handlers", "cases"):
                continue
            if isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
            elif isinstance(value, list):
                setattr(node, field, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
        return node

    def visit_Await(self, node: ast.Await) -> ast.AST:
        call = node.value
        if _observe_call(call) and isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr == "run_execution":
            return ast.Await(ast.Call(ast.Attribute(call.args[0], "run", ast.Load()), [], []))
        return self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        kept = [(k, v) for k, v in zip(node.keys, node.values, strict=True) if not (k is None and _observe_call(v))]
        node.keys = [k for k, _ in kept]
        node.values = [v for _, v in kept]
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _observe_call(node):
            return ast.Dict([], [])
        return self.generic_visit(node)


def strip_module(source: str, where: str) -> str:
    tree = ast.parse(source)
    tree = _Strip().visit(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == ALIAS and not isinstance(node.ctx, ast.Store):
            raise SystemExit(f"{where}:{getattr(node, 'lineno', '?')}: an observability reference no rule removes")
    return ast.unparse(ast.fix_missing_locations(tree))


def strip_tree(src: Path, out: Path) -> list[str]:
    """Copy ``src`` to ``out`` and strip its engine modules; returns the modules changed."""
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"), dirs_exist_ok=True)
    changed = []
    for path in sorted((out / "standardagents" / "engine").rglob("*.py")):
        text = path.read_text()
        if f"{ALIAS}." not in text:
            continue
        path.write_text(strip_module(text, str(path.relative_to(out))))
        changed.append(str(path.relative_to(out)))
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    for name in strip_tree(Path(sys.argv[1]), Path(sys.argv[2])):
        print("stripped", name)
