"""HTTP endpoint definitions: project controllers and thread endpoints with access levels."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict, overload

from ._base import Definition

__all__ = [
    "ControllerDefinition",
    "EndpointAccess",
    "EndpointOptions",
    "ThreadEndpointDefinition",
    "define_controller",
    "define_thread_endpoint",
    "get_endpoint_access",
    "is_thread_endpoint",
]

EndpointAccess = Literal["authenticated", "public"]


class EndpointOptions(TypedDict, total=False):
    """The spec's options object for controllers and thread endpoints."""

    access: EndpointAccess


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


def _access(options: Mapping[str, Any] | None, access: str | None) -> EndpointAccess:
    value = access or (options or {}).get("access") or "authenticated"
    if value == "authenticated":
        return "authenticated"
    if value == "public":
        return "public"
    from ..exceptions import DefinitionError

    raise DefinitionError([("access", f"{value!r} is not an access level (authenticated or public)")])


@overload
def define_controller(handler: Callable[..., Any], options: EndpointOptions | None = None, *,
                      access: EndpointAccess | None = None) -> ControllerDefinition: ...
@overload
def define_controller(handler: None = None, options: EndpointOptions | None = None, *,
                      access: EndpointAccess | None = None) -> Callable[[Callable[..., Any]], ControllerDefinition]: ...
def define_controller(
    handler: Callable[..., Any] | None = None, options: EndpointOptions | None = None, *, access: EndpointAccess | None = None
) -> ControllerDefinition | Callable[[Callable[..., Any]], ControllerDefinition]:
    """Define a controller (usable as a decorator); access defaults to ``authenticated``."""
    level = _access(options, access)
    if handler is None:
        return lambda fn: ControllerDefinition(handler=fn, access=level)
    return ControllerDefinition(handler=handler, access=level)


def _thread_endpoint(handler: Callable[..., Any], access: EndpointAccess) -> ThreadEndpointDefinition:
    params = [p for p in inspect.signature(handler).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return ThreadEndpointDefinition(handler=handler, access=access, accepts=min(len(params), 4))


@overload
def define_thread_endpoint(handler: Callable[..., Any], options: EndpointOptions | None = None, *,
                           access: EndpointAccess | None = None) -> ThreadEndpointDefinition: ...
@overload
def define_thread_endpoint(handler: None = None, options: EndpointOptions | None = None, *,
                           access: EndpointAccess | None = None) -> Callable[[Callable[..., Any]], ThreadEndpointDefinition]: ...
def define_thread_endpoint(
    handler: Callable[..., Any] | None = None, options: EndpointOptions | None = None, *, access: EndpointAccess | None = None
) -> ThreadEndpointDefinition | Callable[[Callable[..., Any]], ThreadEndpointDefinition]:
    """Define a thread endpoint (usable as a decorator); access defaults to ``authenticated``."""
    level = _access(options, access)
    if handler is None:
        return lambda fn: _thread_endpoint(fn, level)
    return _thread_endpoint(handler, level)


def get_endpoint_access(value: Any) -> str:
    """The declared access level of an endpoint (``authenticated`` when none is declared)."""
    return getattr(value, "access", None) or "authenticated"


def is_thread_endpoint(value: Any) -> bool:
    return isinstance(value, ThreadEndpointDefinition)
