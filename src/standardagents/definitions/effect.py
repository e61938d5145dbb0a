"""Effect definitions: work scheduled from a thread to run later, once, with retries."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ._base import Definition, build, check_snake_case

__all__ = ["EffectDefinition", "define_effect"]


class EffectDefinition(Definition):
    """A named effect; ``handler(state, args)`` runs when it is due."""

    name: str
    description: str = ""
    args_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    handler: Callable[..., Any]
    max_attempts: int = Field(default=5, ge=1)

    async def run(self, state: Any, args: dict[str, Any]) -> Any:
        result = self.handler(state, args)
        if inspect.isawaitable(result):
            result = await result
        return result


def define_effect(
    name: str | Mapping[str, Any] | Sequence[Any],
    description: str | None = None,
    args_schema: Mapping[str, Any] | type[BaseModel] | None = None,
    handler: Callable[..., Any] | None = None,
    *,
    max_attempts: int | None = None,
) -> EffectDefinition:
    """Define an effect: ``define_effect(name, description, args_schema, handler)``, keywords,
    a dict, or the spec's packed tuple shape ``(name, description, args_schema, handler)``."""
    data: dict[str, Any] = {}
    if isinstance(name, Mapping):
        data = dict(name)
    elif isinstance(name, tuple | list):
        data = dict(zip(["name", "description", "args_schema", "handler"], name, strict=False))
    else:
        data["name"] = name
    for key, value in (("description", description), ("args_schema", args_schema), ("handler", handler),
                       ("max_attempts", max_attempts)):
        if value is not None:
            data[key] = value
    schema = data.get("args_schema", data.get("argsSchema"))
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        data.pop("argsSchema", None)
        data["args_schema"] = schema.model_json_schema()
    problems: list[tuple[str, str]] = []
    if isinstance(data.get("name"), str) and (bad := check_snake_case(data["name"])):
        problems.append(("name", bad))
    return build(EffectDefinition, data, problems)
