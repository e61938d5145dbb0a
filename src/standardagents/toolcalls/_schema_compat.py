"""Making tool schemas acceptable to endpoints that refuse some of JSON Schema.

Local servers turn tool schemas into grammars and refuse what their converter cannot express
(``$ref``, unions, ``format``, conditionals); some refuse ``tools`` altogether. The loop
retries a refused request one level looser (sanitized, then relaxed, then without tools) and
latches the level per endpoint and model, so each refusal is paid once; the latches export as
a versioned JSON blob so a restart need not learn them again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ..exceptions import StandardAgentsError

__all__ = [
    "CAPABILITY_SNAPSHOT_VERSION",
    "CapabilityLatches",
    "CompatLevel",
    "OutputMode",
    "default_latches",
    "export_capabilities",
    "import_capabilities",
    "is_grammar_error",
    "prepare_tools",
    "relax_tools",
    "sanitize_tools",
]

CompatLevel = Literal["sanitized", "relaxed", "no_tools"]
_LEVELS: tuple[CompatLevel, ...] = ("sanitized", "relaxed", "no_tools")
_RANK = {level: i for i, level in enumerate(_LEVELS)}
#: how a typed final answer is produced, from the tightest to the loosest
OutputMode = Literal["native", "tool", "prompted"]
_OUTPUT_MODES: tuple[OutputMode, ...] = ("native", "tool", "prompted")
_OUTPUT_RANK = {mode: i for i, mode in enumerate(_OUTPUT_MODES)}
CAPABILITY_SNAPSHOT_VERSION = 1
_SNAPSHOT_KIND = "standardagents.capabilities"

# Keywords a grammar converter commonly refuses and a model does not need to fill arguments.
_DROP = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "examples",
        "patternProperties",
        "if",
        "then",
        "else",
        "not",
        "dependentSchemas",
        "dependentRequired",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "readOnly",
        "writeOnly",
        "deprecated",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "$defs",
        "definitions",
    }
)
# Formats that grammar-constrained servers and strict-mode endpoints both understand.
_KEPT_FORMATS = frozenset({"date-time", "date", "time", "uuid"})
# What relax_tools removes on top of sanitizing: constraints, not meaning.
_CONSTRAINTS = frozenset(
    {
        "required",
        "additionalProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "default",
        "title",
        "prefixItems",
    }
)
_TYPE_CHECK = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


# --- sanitize / relax ---------------------------------------------------------------------


def sanitize_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions rewritten into the JSON Schema subset grammar converters accept.

    Local ``$ref`` s are inlined (a reference back into itself becomes a plain ``object``),
    ``anyOf``/``oneOf`` with a ``null`` member become the other member, a single ``allOf``
    is merged, refused keywords and uncommon ``format`` values are dropped, a ``default``
    that does not fit its type is dropped, and the top level is always ``type: object`` with
    ``properties``. The input is not modified.
    """
    return [_map_tool(tool, relaxed=False) for tool in tools]


def relax_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions loosened for endpoints that refused even the sanitized schema.

    On top of :func:`sanitize_tools`: ``required``, ``additionalProperties``, ``default``,
    ``title`` and every range, length, pattern and ``format`` constraint are dropped, and a
    union collapses to its first member. Descriptions stay (they carry the meaning the
    constraints did) and so do string ``enum`` s, which every grammar supports and which stop
    a model inventing values; an ``enum`` with non-string members is dropped.
    """
    return [_map_tool(tool, relaxed=True) for tool in tools]


def prepare_tools(
    tools: Iterable[Mapping[str, Any]], level: CompatLevel | None
) -> list[dict[str, Any]]:
    """The tool list to send at a latch level: as given for ``None``, empty for ``no_tools``."""
    if level is None:
        return [dict(tool) for tool in tools]
    if level == "sanitized":
        return sanitize_tools(tools)
    if level == "relaxed":
        return relax_tools(tools)
    if level == "no_tools":
        return []
    raise StandardAgentsError(f"unknown compatibility level {level!r}; use one of {_LEVELS}")


def _map_tool(tool: Mapping[str, Any], *, relaxed: bool) -> dict[str, Any]:
    out = dict(tool)
    fn = tool.get("function")
    if not isinstance(fn, Mapping):
        return out
    fn_out = dict(fn)
    params = fn.get("parameters")
    root = params if isinstance(params, Mapping) else {}
    schema = _clean(root, root, relaxed, frozenset(), 0) if root else {}
    if not isinstance(schema, dict):
        schema = {}
    schema["type"] = "object"
    if not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    if "required" in schema:
        names = [n for n in schema["required"] if n in schema["properties"]]
        if names:
            schema["required"] = names
        else:
            del schema["required"]
    fn_out["parameters"] = schema
    out["function"] = fn_out
    return out


def _lookup(ref: str, root: Mapping[str, Any]) -> Any:
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].lstrip("/").split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _clean(
    schema: Any, root: Mapping[str, Any], relaxed: bool, seen: frozenset[str], depth: int
) -> Any:
    if not isinstance(schema, Mapping):
        return schema if isinstance(schema, bool) else {}
    if depth > 48:
        return {"type": "object"}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _lookup(ref, root)
        if ref in seen or not isinstance(target, Mapping):
            # A cycle (or a dangling/remote ref): stop with the loosest shape that still types.
            note = {k: v for k, v in schema.items() if k == "description"}
            return {"type": "object", **note}
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _clean(merged, root, relaxed, seen | {ref}, depth + 1)

    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list) and members:
            rest = {k: v for k, v in schema.items() if k != key}
            return _union(members, rest, root, relaxed, seen, depth)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for member in all_of:
            resolved = _clean(member, root, relaxed, seen, depth + 1)
            if isinstance(resolved, dict):
                _merge_into(merged, resolved)
        return _clean(merged, root, relaxed, seen, depth + 1)

    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROP or (relaxed and key in _CONSTRAINTS):
            continue
        if key == "format" and value not in _KEPT_FORMATS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {
                name: _clean(sub, root, relaxed, seen, depth + 1) for name, sub in value.items()
            }
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _clean(value, root, relaxed, seen, depth + 1)
        elif key == "items" and isinstance(value, list):  # old tuple form: keep the first shape
            out[key] = _clean(value[0], root, relaxed, seen, depth + 1) if value else {}
        elif key == "prefixItems" and isinstance(value, list):
            out[key] = [_clean(sub, root, relaxed, seen, depth + 1) for sub in value]
        elif key == "enum" and relaxed and not all(isinstance(v, str) for v in value or []):
            continue
        else:
            out[key] = value
    _fix_type(out, relaxed)
    if "default" in out and not _fits(out["default"], out):
        del out["default"]
    if "required" in out and (not isinstance(out["required"], list) or not out["required"]):
        del out["required"]
    return out


def _union(
    members: list[Any],
    rest: dict[str, Any],
    root: Mapping[str, Any],
    relaxed: bool,
    seen: frozenset[str],
    depth: int,
) -> Any:
    cleaned = [_clean(m, root, relaxed, seen, depth + 1) for m in members]
    non_null = [m for m in cleaned if not (isinstance(m, dict) and m.get("type") == "null")]
    if not non_null:
        return _clean({**rest, "type": "null"}, root, relaxed, seen, depth + 1)
    if len(non_null) == 1 or relaxed:
        first = non_null[0] if isinstance(non_null[0], dict) else {}
        combined = {**first, **rest}
        return _clean(combined, root, relaxed, seen, depth + 1)
    out = _clean(rest, root, relaxed, seen, depth + 1) if rest else {}
    out["anyOf"] = non_null
    return out


def _merge_into(target: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if key == "properties" and isinstance(target.get(key), dict) and isinstance(value, dict):
            target[key] = {**target[key], **value}
        elif key == "required" and isinstance(target.get(key), list) and isinstance(value, list):
            target[key] = list(dict.fromkeys([*target[key], *value]))
        else:
            target.setdefault(key, value)


def _fix_type(schema: dict[str, Any], relaxed: bool) -> None:
    t = schema.get("type")
    if isinstance(t, list):
        kinds = [k for k in t if k != "null"]
        if len(kinds) == 1:
            schema["type"] = kinds[0]
        elif not kinds:
            schema["type"] = "null"
        else:
            # Several real types stay a type list; relaxed keeps only the first.
            schema["type"] = kinds[0] if relaxed else kinds
    elif t is None:
        if "properties" in schema:
            schema["type"] = "object"
        elif "items" in schema:
            schema["type"] = "array"
    if schema.get("type") == "object" and "properties" not in schema and "anyOf" not in schema:
        schema["properties"] = {}


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    check = _TYPE_CHECK.get(str(schema.get("type")))
    if check is not None and not check(value):
        return False
    enum = schema.get("enum")
    return not (isinstance(enum, list) and value not in enum)


# --- recognising a refusal ----------------------------------------------------------------

_REFUSALS = re.compile(
    "|".join(
        [
            r"does(?:n't| not) support tools",
            r"tools? (?:is|are|use is|calling is) not supported",
            r"(?:function|tool)[ _-]calling is not (?:supported|enabled)",
            r"does(?:n't| not) support (?:function|tool)[ _-]?calling",
            r"not support(?:ed)? (?:for )?(?:function|tool)s?",
            r"invalid schema for function",
            r"invalid_function_parameters",
            r"enable-auto-tool-choice",
            r"tool-call-parser",
            r"requires --jinja",
            r"grammar",
            r"json[ _-]?schema (?:conversion|is not supported|not supported|error|failed)",
            r"unsupported (?:json )?schema",
            r"(?:invalid|unsupported|unrecognized|not supported|failed to (?:parse|convert|compile))"
            r"[^.\n]{0,60}\bschema\b",
            r"\bschema\b[^.\n]{0,60}(?:invalid|unsupported|not supported|not allowed|failed)",
            r"'(?:\$ref|anyOf|oneOf|allOf|format|pattern)' is not (?:supported|permitted|allowed)",
        ]
    ),
    re.IGNORECASE,
)
_REFUSAL_STATUSES = frozenset({400, 404, 422, 500, 501})


def is_grammar_error(error: Any) -> bool:
    """True when an endpoint refused the request's tool schemas or ``tools`` themselves.

    Takes an exception (ours, the ``openai`` SDK's, anything with ``status``/``status_code``
    and ``body``/``message``), a response body dict, or message text. A status outside
    400/404/422/500/501 is never a schema refusal, so rate limits and outages do not latch.
    """
    status, texts = _describe(error, 0)
    if status is not None and status not in _REFUSAL_STATUSES:
        return False
    return any(_REFUSALS.search(text) for text in texts if text)


def _describe(error: Any, depth: int) -> tuple[int | None, list[str]]:
    if isinstance(error, str):
        return None, [error]
    if isinstance(error, bytes):
        return None, [error.decode("utf-8", "replace")]
    if isinstance(error, Mapping):
        code = error.get("status") or error.get("status_code") or error.get("code")
        return (code if isinstance(code, int) else None), [_dump(error)]
    status: Any = getattr(error, "status", None) or getattr(error, "status_code", None)
    if status is None:
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
    texts = [str(error)]
    for attr in ("message", "body"):
        value = getattr(error, attr, None)
        if value is not None:
            texts.append(value if isinstance(value, str) else _dump(value))
    cause = getattr(error, "__cause__", None)
    if isinstance(cause, BaseException) and depth < 3:
        cause_status, cause_texts = _describe(cause, depth + 1)
        texts.extend(cause_texts)
        status = status if status is not None else cause_status
    return (status if isinstance(status, int) else None), texts


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


# --- latches ------------------------------------------------------------------------------


class CapabilityLatches:
    """What each endpoint and model refused, as the loosest tool level it needs.

    A latch only tightens: latching ``sanitized`` after ``relaxed`` keeps ``relaxed``, since
    the looser level already worked (or was needed).
    """

    def __init__(self) -> None:
        self._levels: dict[tuple[str, str], CompatLevel] = {}
        self._output: dict[tuple[str, str], OutputMode] = {}

    def latch(self, endpoint: str, model: str, level: CompatLevel) -> CompatLevel:
        """Record that ``model`` on ``endpoint`` needs at least ``level``; return the level held."""
        if level not in _RANK:
            raise StandardAgentsError(
                f"unknown compatibility level {level!r}; use one of {', '.join(_LEVELS)}"
            )
        key = (endpoint, model)
        current = self._levels.get(key)
        if current is None or _RANK[level] > _RANK[current]:
            self._levels[key] = level
            return level
        return current

    def level_for(self, endpoint: str, model: str) -> CompatLevel | None:
        """The latched level, or ``None`` when nothing was refused (send tools as they are)."""
        return self._levels.get((endpoint, model))

    def escalate(self, endpoint: str, model: str) -> CompatLevel | None:
        """Latch the next looser level after a refusal; ``None`` when already at ``no_tools``."""
        current = self.level_for(endpoint, model)
        if current == "no_tools":
            return None
        nxt = _LEVELS[0] if current is None else _LEVELS[_RANK[current] + 1]
        return self.latch(endpoint, model, nxt)

    def output_mode_for(self, endpoint: str, model: str) -> OutputMode | None:
        """The latched way to produce typed output, or ``None`` when nothing was refused."""
        return self._output.get((endpoint, model))

    def latch_output(self, endpoint: str, model: str, mode: OutputMode) -> OutputMode:
        """Record that ``model`` on ``endpoint`` needs at least output ``mode``; return the mode held."""
        if mode not in _OUTPUT_RANK:
            raise StandardAgentsError(f"unknown output mode {mode!r}; use one of {', '.join(_OUTPUT_MODES)}")
        key = (endpoint, model)
        current = self._output.get(key)
        if current is None or _OUTPUT_RANK[mode] > _OUTPUT_RANK[current]:
            self._output[key] = mode
            return mode
        return current

    def escalate_output(self, endpoint: str, model: str, refused: OutputMode) -> OutputMode | None:
        """Latch the mode after ``refused``; ``None`` when ``prompted`` (the last resort) was refused."""
        if refused == "prompted":
            return None
        return self.latch_output(endpoint, model, _OUTPUT_MODES[_OUTPUT_RANK[refused] + 1])

    def reset(self) -> None:
        """Forget every latch."""
        self._levels.clear()
        self._output.clear()

    def export_capabilities(self) -> str:
        """The latches as a versioned JSON text a host can store and import after a restart."""
        endpoints: dict[str, dict[str, str]] = {}
        for (endpoint, model), level in sorted(self._levels.items()):
            endpoints.setdefault(endpoint, {})[model] = level
        snapshot: dict[str, Any] = {
            "kind": _SNAPSHOT_KIND,
            "version": CAPABILITY_SNAPSHOT_VERSION,
            "endpoints": endpoints,
        }
        if self._output:
            output: dict[str, dict[str, str]] = {}
            for (endpoint, model), mode in sorted(self._output.items()):
                output.setdefault(endpoint, {})[model] = mode
            snapshot["output"] = output
        return json.dumps(snapshot, sort_keys=True)

    def import_capabilities(self, blob: str | bytes | Mapping[str, Any] | None) -> int:
        """Latch what a snapshot records on top of what is known; return how many it latched.

        A snapshot of another version, or one that is not readable, is ignored (returns 0):
        the cost of ignoring it is a few refused requests, not a failure.
        """
        data: Any = blob
        if isinstance(blob, str | bytes):
            try:
                data = json.loads(blob)
            except ValueError:
                return 0
        if not isinstance(data, Mapping) or data.get("version") != CAPABILITY_SNAPSHOT_VERSION:
            return 0
        if data.get("kind", _SNAPSHOT_KIND) != _SNAPSHOT_KIND:
            return 0
        endpoints = data.get("endpoints")
        if not isinstance(endpoints, Mapping):
            return 0
        count = 0
        output = data.get("output")
        if isinstance(output, Mapping):
            for endpoint, models in output.items():
                if not isinstance(endpoint, str) or not isinstance(models, Mapping):
                    continue
                for model, mode in models.items():
                    if isinstance(model, str) and mode in _OUTPUT_RANK:
                        self.latch_output(endpoint, model, mode)
                        count += 1
        for endpoint, models in endpoints.items():
            if not isinstance(endpoint, str) or not isinstance(models, Mapping):
                continue
            for model, level in models.items():
                if isinstance(model, str) and level in _RANK:
                    self.latch(endpoint, model, level)
                    count += 1
        return count


default_latches = CapabilityLatches()
"""The process-wide latches the module-level snapshot functions read and write."""


def export_capabilities() -> str:
    """The process-wide latches as a versioned JSON text."""
    return default_latches.export_capabilities()


def import_capabilities(blob: str | bytes | Mapping[str, Any] | None) -> int:
    """Latch a stored snapshot into the process-wide latches; unreadable ones are ignored."""
    return default_latches.import_capabilities(blob)
