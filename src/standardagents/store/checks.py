"""What a database can hold: text without NUL characters or unpaired surrogates, keys and
paths within their column sizes, row windows within 64-bit integers, JSON without NaN or
infinities. Checked before a statement runs, so both databases refuse the same values with
the same clear message (PostgreSQL would refuse some of them with its own error, SQLite would
store some and fail on reading them back)."""

from __future__ import annotations

import math
import re
from typing import Any

from ..exceptions import UnstorableValueError

__all__ = [
    "INT64_MAX",
    "MAX_FILE_PATH",
    "MAX_JSON_DEPTH",
    "check_json",
    "check_key",
    "check_path",
    "check_text",
    "check_window",
    "json_problem",
    "text_problem",
]

#: the largest row count or offset either database accepts
INT64_MAX = 2**63 - 1
#: the longest thread file path (the column's size)
MAX_FILE_PATH = 1024
#: how deeply JSON values may nest
MAX_JSON_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(value: str, *, allow_nul: bool = False) -> str | None:
    """Why ``value`` is not storable text, or ``None``."""
    if not allow_nul and "\x00" in value:
        return "contains a NUL character (\\u0000)"
    if _SURROGATE.search(value):
        return "contains an unpaired surrogate (not valid Unicode)"
    return None


def _finite_problem(value: float) -> str | None:
    return None if math.isfinite(value) else f"is {value!r}: only finite numbers are allowed"


def json_problem(value: Any, *, allow_nul: bool = False, max_depth: int = MAX_JSON_DEPTH,
                 where: str = "") -> str | None:
    """The first problem in a JSON value (with where it is), or ``None``: a NaN or infinity, a
    string (or key) that is not storable text, or nesting deeper than ``max_depth``. Walks
    without recursion, so any depth is safe to check."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        label = at or "the value"
        if isinstance(item, str):
            problem = text_problem(item, allow_nul=allow_nul)
            if problem:
                return f"{label} {problem}"
        elif isinstance(item, float):
            problem = _finite_problem(item)
            if problem:
                return f"{label} {problem}"
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                return f"{label} nests more than {max_depth} levels deep"
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str):
                        problem = text_problem(key, allow_nul=allow_nul)
                        if problem:
                            return f"a key in {label} {problem}"
                    stack.append((child, f"{at}.{key}" if at else str(key), depth + 1))
            else:
                for i, child in enumerate(item):
                    stack.append((child, f"{at}[{i}]", depth + 1))
    return None


def check_json(field: str, value: Any) -> None:
    problem = json_problem(value, where=field)
    if problem:
        raise UnstorableValueError(field, problem)


def check_text(field: str, value: str | None, *, max_length: int | None = None) -> None:
    if value is None:
        return
    problem = text_problem(value)
    if problem is None and max_length is not None and len(value) > max_length:
        problem = f"is {len(value)} characters long; the limit is {max_length}"
    if problem:
        raise UnstorableValueError(field, f"{field} {problem}")


def check_key(field: str, value: str | None, max_length: int = 255) -> None:
    check_text(field, value, max_length=max_length)


def check_path(path: str) -> None:
    check_text("file path", path, max_length=MAX_FILE_PATH)


def check_window(limit: int | None, offset: int) -> None:
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise UnstorableValueError(name, f"{name} {value} does not fit in a 64-bit integer")
