"""What a turn's definitions were when it started: a digest of the agent, its sides' prompts,
models, tools and hooks (their code included), kept on the execution record.

A turn can wait across a deploy (an approval pending for days, a client tool, a crash
resumed after a release). When it goes on, the digest of the definitions it would now run on
is compared with the one it started with, and the agent's ``on_definition_change`` policy
decides: go on with the new definitions, noting the change on the record, or end the turn
with a reason that says so. The digest is stable across processes and restarts: it is made
from definitions' values and their functions' source (or code), never from object ids.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

__all__ = ["CHANGED_KEY", "DIGEST_KEY", "definitions_digest"]

#: the execution record's state key of the digest its turn started with
DIGEST_KEY = "definitions"
#: the state key noting a resume on changed definitions: ``{"from", "to", "policy"}``
CHANGED_KEY = "definitionsChanged"


def _code(fn: Any) -> str:
    """A function's source (its code's bytes and constants where there is no source)."""
    target = getattr(fn, "__wrapped__", fn)
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        if code is None:
            return type(target).__qualname__
        return code.co_code.hex() + repr([c for c in code.co_consts if isinstance(c, str | int | float | bytes)])


def _canon(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data: models by their fields, functions by their code, other
    objects by their type (never their address)."""
    if depth > 12:
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, BaseModel):
        return _canon(dict(value), depth + 1)
    if isinstance(value, dict):
        return {str(k): _canon(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_canon(v, depth + 1) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, type):
        if issubclass(value, BaseModel):
            return value.model_json_schema()
        return value.__qualname__
    if callable(value):
        return {"code": _code(value)}
    return type(value).__qualname__


def definitions_digest(parts: Iterable[Any]) -> str:
    """A short digest of definitions (an agent's side setups: the agent, prompt, model and
    fallbacks, tools and hooks of each)."""
    digest = hashlib.sha256()
    for part in parts:
        for name in ("agent", "prompt", "model", "fallbacks"):
            digest.update(json.dumps(_canon(getattr(part, name, None)), sort_keys=True, default=str).encode())
        toolbox = getattr(part, "toolbox", None)
        tools = getattr(toolbox, "tools", {}) or {}
        for tool_name in sorted(tools):
            digest.update(json.dumps(_canon(tools[tool_name]), sort_keys=True, default=str).encode())
        hooks = getattr(getattr(part, "hooks", None), "by_name", {}) or {}
        for hook_name in sorted(hooks):
            for active in hooks[hook_name]:
                digest.update(json.dumps(_canon(getattr(active, "definition", None)), sort_keys=True,
                                         default=str).encode())
    return digest.hexdigest()[:16]
