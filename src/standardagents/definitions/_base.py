"""Shared base for definitions: snake_case fields that also accept the spec's camelCase."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from ..exceptions import DefinitionError

__all__ = ["SNAKE_CASE", "Definition", "check_snake_case", "problems_from_validation"]

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def check_snake_case(value: str) -> str | None:
    """Return a problem message when ``value`` is not a snake_case name."""
    if not isinstance(value, str) or not SNAKE_CASE.match(value):
        return f"{value!r} is not a snake_case name (lowercase letters, digits and single underscores)"
    return None


class Definition(BaseModel):
    """Base of every definition: validated once, then read-only.

    ``extra="forbid"`` turns a misspelt field into an error naming it, which is what a
    user needs far more often than silently ignored keys.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
        protected_namespaces=(),
    )

    #: set by the project loader: which file defined this (for error messages)
    source_file: str | None = None
    #: set by the package loader for packed definitions
    package: Any = None


def problems_from_validation(exc: ValidationError) -> list[tuple[str, str]]:
    """Turn a Pydantic error into ``(field path, message)`` pairs, all of them."""
    out: list[tuple[str, str]] = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        out.append((loc, msg))
    return out


def build(cls: type[Definition], data: dict[str, Any], extra_problems: list[tuple[str, str]]) -> Any:
    """Validate ``data`` into ``cls`` and raise one DefinitionError with every problem."""
    problems: list[tuple[str, str]] = []
    obj = None
    try:
        obj = cls.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_from_validation(exc))
    problems.extend(extra_problems)
    if problems:
        name = data.get("name") or data.get("id")
        raise DefinitionError(problems, source=data.get("source_file") or (f"{cls.__name__} {name!r}" if name else cls.__name__))
    return obj
