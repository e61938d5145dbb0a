"""Reading tool-call arguments that a model did not write as clean JSON.

Models emit almost-JSON (fences, trailing commas, single quotes, Python literals) and, when
a reply hits its token limit, JSON that simply stops. The first is worth repairing; the second
must be reported as cut off, because a repaired prefix would run the tool on half an intent.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

__all__ = ["ParsedArguments", "coerce_to_schema", "find_json_end", "parse_tool_arguments"]

_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_TRUNCATED_MESSAGE = (
    "the arguments stop before the JSON is closed (an open string or bracket at the end), "
    "so the reply was probably cut off by its token limit; ask again with a larger "
    "max_tokens or shorter arguments"
)


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    """What :func:`parse_tool_arguments` made of a tool call's argument text.

    ``value`` is the argument object, or ``None`` when the text could not be read (then
    ``error`` says why). ``repaired`` is true whenever the value is not what a strict JSON
    parser would have returned; ``notes`` lists each change so it can be logged.
    """

    value: dict[str, Any] | None
    repaired: bool = False
    truncated: bool = False
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is a value to call the tool with."""
        return self.value is not None


def _token_start(text: str, i: int) -> bool:
    """True when position ``i`` begins a JSON token (after a structural char or at the start)."""
    j = i - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    return j < 0 or text[j] in "{[,:"


def find_json_end(text: str, start: int) -> int | None:
    """Index just past the object or array opening at ``start``; ``None`` if the text ends first.

    Quote-aware (double quotes, and single quotes where a token starts) and skips ``//`` and
    ``/* */`` comments, so brackets inside strings or comments never count.
    """
    depth = 0
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"' or (ch == "'" and _token_start(text, i)):
            quote = ch
            i += 1
            while i < n:
                c = text[i]
                if c == "\\":
                    i += 2
                    continue
                if c == quote:
                    break
                i += 1
            else:
                return None
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif (
            ch == "/"
            and i + 1 < n
            and text[i + 1] in "/*"
            and (i == 0 or text[i - 1] in " \t\r\n{[,")
        ):
            if text[i + 1] == "/":
                nl = text.find("\n", i)
                if nl < 0:
                    return None
                i = nl
            else:
                close = text.find("*/", i + 2)
                if close < 0:
                    return None
                i = close + 1
        i += 1
    return None


def parse_tool_arguments(text: str | None, schema: dict[str, Any] | None = None) -> ParsedArguments:
    """Parse a tool call's argument text into an object, repairing what a model plainly meant.

    Strict JSON takes the fast path. Otherwise fences, prose, comments and almost-JSON are
    repaired; text that ends inside a string or bracket is reported ``truncated`` rather than
    repaired. Empty text is ``{}``. With ``schema``, values are coerced where the intent is
    plain (see :func:`coerce_to_schema`).
    """
    if text is None or not text.strip():
        return _finish({}, False, [], schema)
    try:
        value = json.loads(text, strict=False)
    except ValueError:
        pass
    else:
        if isinstance(value, dict):
            return _finish(value, False, [], schema)
        if isinstance(value, str):
            inner = parse_tool_arguments(value)
            if inner.value is not None:
                notes = [
                    "arguments were a JSON string holding the object; decoded it",
                    *inner.notes,
                ]
                return _finish(inner.value, True, notes, schema)
        return _not_object(value)
    return _repair(text, schema)


def _repair(text: str, schema: dict[str, Any] | None) -> ParsedArguments:
    notes: list[str] = []
    candidate = text
    fence = _FENCE.search(text)
    if fence is not None:
        candidate = fence.group(1)
        notes.append("removed a code fence")
    start = candidate.find("{")
    if start < 0:
        value = _repair_loads(candidate)
        if isinstance(value, dict) and value:
            return _finish(value, True, [*notes, "repaired almost-JSON"], schema)
        if candidate.lstrip().startswith("["):
            if find_json_end(candidate, candidate.index("[")) is None:
                return ParsedArguments(None, truncated=True, error=_TRUNCATED_MESSAGE, notes=notes)
            return _not_object(value)
        return ParsedArguments(
            None,
            error='the arguments hold no JSON object; expected {"name": value, ...}',
            notes=notes,
        )
    end = find_json_end(candidate, start)
    if end is None:
        return ParsedArguments(None, truncated=True, error=_TRUNCATED_MESSAGE, notes=notes)
    body = candidate[start:end]
    if candidate[:start].strip() or candidate[end:].strip():
        notes.append("removed text around the JSON object")
    try:
        value = json.loads(body, strict=False)
    except ValueError:
        value = _repair_loads(body)
        notes.append("repaired almost-JSON")
    if not isinstance(value, dict):
        return _not_object(value)
    return _finish(value, True, notes, schema)


def _repair_loads(text: str) -> Any:
    try:
        return json_repair.loads(text)
    except Exception:  # the repair library is a best effort and may raise on odd input
        return None


def _not_object(value: Any) -> ParsedArguments:
    kind = type(value).__name__ if value is not None else "null"
    return ParsedArguments(
        None,
        error=f'tool arguments must be a JSON object, got {kind}; wrap them as {{"name": value}}',
    )


def _finish(
    value: dict[str, Any], repaired: bool, notes: list[str], schema: dict[str, Any] | None
) -> ParsedArguments:
    if schema:
        value, coerced = coerce_to_schema(value, schema)
        if coerced:
            notes = [*notes, *coerced]
            repaired = True
    return ParsedArguments(value, repaired=repaired, notes=notes)


# --- coercion -----------------------------------------------------------------------------

_INT = re.compile(r"[+-]?\d+(?:\.0*)?")
_NUM = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def coerce_to_schema(value: Any, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    """Coerce ``value`` towards ``schema`` where a model's intent is plain; return it and notes.

    ``"5"`` for an integer, ``"2.5"`` for a number, ``"true"`` for a boolean, a lone value
    where an array is expected, and an object or array sent as a JSON string; applied through
    ``properties``, ``additionalProperties``, ``items`` and local ``$ref``. Anything else is
    left for the schema validator to report.
    """
    notes: list[str] = []
    result = _coerce(value, schema, schema, "$", notes, 0)
    return result, notes


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return schema
        node = node[part]
    return node if isinstance(node, dict) else schema


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    if "properties" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return []


def _matches(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    if t == "null":
        return value is None
    return True


_NO = object()


def _convert(value: Any, t: str) -> Any:
    """One coercion of ``value`` to type ``t``, or ``_NO``."""
    if isinstance(value, str):
        s = value.strip()
        if t == "integer" and _INT.fullmatch(s):
            return int(float(s)) if "." in s else int(s)
        if t == "number" and _NUM.fullmatch(s):
            number = float(s)
            if math.isfinite(number):
                return int(number) if re.fullmatch(r"[+-]?\d+", s) else number
        if t == "boolean" and s.lower() in ("true", "false"):
            return s.lower() == "true"
        if t == "null" and s.lower() in ("null", "none"):
            return None
        if t in ("object", "array") and s[:1] in "{[":
            try:
                parsed = json.loads(s)
            except ValueError:
                parsed = _repair_loads(s) if find_json_end(s, 0) is not None else None
            if _matches(parsed, t):
                return parsed
    elif t == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    elif t == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _NO


def _coerce(
    value: Any, schema: Any, root: dict[str, Any], path: str, notes: list[str], depth: int
) -> Any:
    if not isinstance(schema, dict) or depth > 64:
        return value
    schema = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list) and members:
            return _coerce_union(value, members, root, path, notes, depth)
    types = _types(schema)
    if types and not any(_matches(value, t) for t in types):
        value = _coerce_type(value, types, schema, root, path, notes, depth)
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if isinstance(props, dict) or isinstance(extra, dict):
            out: dict[str, Any] = {}
            for k, v in value.items():
                sub = props.get(k) if isinstance(props, dict) else None
                if sub is None and isinstance(extra, dict):
                    sub = extra
                out[k] = _coerce(v, sub, root, f"{path}.{k}", notes, depth + 1) if sub else v
            return out
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [
                _coerce(v, items, root, f"{path}[{i}]", notes, depth + 1)
                for i, v in enumerate(value)
            ]
    return value


def _coerce_type(
    value: Any,
    types: list[str],
    schema: dict[str, Any],
    root: dict[str, Any],
    path: str,
    notes: list[str],
    depth: int,
) -> Any:
    for t in types:
        converted = _convert(value, t)
        if converted is not _NO:
            notes.append(f"{path}: {_show(value)} -> {_show(converted)} ({t})")
            return converted
    if "array" in types and value is not None:
        notes.append(f"{path}: wrapped a lone {_show(value)} in a list (array)")
        return [value]
    return value


def _coerce_union(
    value: Any,
    members: list[Any],
    root: dict[str, Any],
    path: str,
    notes: list[str],
    depth: int,
) -> Any:
    resolved = [_resolve(m, root) for m in members if isinstance(m, dict)]
    for member in resolved:
        types = _types(member)
        if not types or any(_matches(value, t) for t in types):
            return _coerce(value, member, root, path, notes, depth + 1)
    for member in resolved:
        trial: list[str] = []
        out = _coerce(value, member, root, path, trial, depth + 1)
        if trial:
            notes.extend(trial)
            return out
    return value


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
