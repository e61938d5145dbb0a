import ast
import operator
import re
from collections.abc import Callable
from typing import Any

from standardagents import define_tool

_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}
_ARITHMETIC = re.compile(r"[-+(]*\d[\d.\s()+\-*/%^x×]*")


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / ** % // are allowed")


def _expression(text: str) -> str:
    """The arithmetic in ``text`` ("What is 12 x 7?" -> "12 * 7")."""
    found = max(_ARITHMETIC.findall(text), key=len, default="").strip()
    if not found:
        raise ValueError(f"no arithmetic found in {text!r}")
    return found.replace("×", "*").replace("x", "*").replace("^", "**")


@define_tool(progress_argument="expression")
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: An arithmetic expression such as "17 * (3 + 4)".
    """
    cleaned = _expression(expression)
    value = _evaluate(ast.parse(cleaned, mode="eval"))
    return f"{cleaned} = {value:g}"
