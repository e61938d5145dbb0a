"""HTTP endpoint definitions: project controllers and thread endpoints with access levels."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

from ._base import Definition

__all__ = [
    "ControllerDefinition",
    "EndpointAccess",
    "ThreadEndpointDefinition",
    "define_controller",
    "define_thread_endpoint",
    "get_endpoint_access",
    "is_thread_endpoint",
]

EndpointAccess = Literal["authenticated", "public"]


class ControllerDefinition(Definition):
    """A project HTTP handler receiving the ``ControllerContext``."""

    handler: Callable[..., Any]
    access: EndpointAccess = "authenticated"

    async def __call__(self, context: Any) -> Any:
        result = self.handler(context)
        if inspect.isawaitable(result):
            result = await result
        return result


class ThreadEndpointDefinition(Definition):
    """A handler mounted under a thread: ``(request, state, params, auth)``, fewer allowed."""

    handler: Callable[..., Any]
    access: EndpointAccess = "authenticated"
    accepts: int = 4

    async def __call__(self, request: Any, state: Any, params: dict[str, str], auth: Any) -> Any:
        result = self.handler(*(request, state, params, auth)[: self.accepts])
        if inspect.isawaitable(result):
            result = await result
        return result


def _access(options: dict[str, Any] | None, access: str | None) -> str:
    value = access or (options or {}).get("access") or "authenticated"
    if value not in ("authenticated", "public"):
        from ..exceptions import DefinitionError

        raise DefinitionError([("access", f"{value!r} is not an access level (authenticated or public)")])
    return value


def define_controller(handler: Callable[..., Any] | None = None, options: dict[str, Any] | None = None, *, access: str | None = None) -> Any:
    """Define a controller (usable as a decorator); access defaults to ``authenticated``."""
    if handler is None:
        return lambda fn: define_controller(fn, options, access=access)
    return ControllerDefinition(handler=handler, access=_access(options, access))  # type: ignore[arg-type]


def define_thread_endpoint(handler: Callable[..., Any] | None = None, options: dict[str, Any] | None = None, *, access: str | None = None) -> Any:
    """Define a thread endpoint (usable as a decorator); access defaults to ``authenticated``."""
    if handler is None:
        return lambda fn: define_thread_endpoint(fn, options, access=access)
    params = [p for p in inspect.signature(handler).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return ThreadEndpointDefinition(handler=handler, access=_access(options, access), accepts=min(len(params), 4))  # type: ignore[arg-type]


def get_endpoint_access(value: Any) -> str:
    """The declared access level of an endpoint (``authenticated`` when none is declared)."""
    return getattr(value, "access", None) or "authenticated"


def is_thread_endpoint(value: Any) -> bool:
    return isinstance(value, ThreadEndpointDefinition)
