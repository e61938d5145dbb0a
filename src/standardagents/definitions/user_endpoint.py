"""User endpoints: the project's own HTTP routes in the caller's user scope.

A user endpoint is mounted under ``{prefix}/users/me/...`` (as a thread endpoint is under a
thread) and receives ``(request, user, params)``: the request, the caller's ``UserState``
(identity, durable values, threads, live stream) and the route's parameters. ``/users/me``
names the caller, so a user endpoint always needs one: its access level is
``authenticated``, and ``public`` is refused when it is defined (a route for anonymous
callers is a controller).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict, overload

from ..exceptions import DefinitionError
from ._base import Definition

__all__ = [
    "MarkedUserEndpoint",
    "UserEndpointAccess",
    "UserEndpointDefinition",
    "UserEndpointHandler",
    "UserEndpointOptions",
    "UserEndpointRouteParams",
    "defineUserEndpoint",
    "define_user_endpoint",
    "isUserEndpoint",
    "is_user_endpoint",
    "routes_collide",
    "user_route",
]

#: the only access level a user endpoint has: the caller is the user it serves
UserEndpointAccess = Literal["authenticated"]
#: the route's parameters: ``[name]`` segments by name, the rest of a ``[*]`` route under ``"*"``
UserEndpointRouteParams = dict[str, str]
#: ``(request, user, params)``; a handler may take fewer (``(request, user)``, ``(request)``).
#: It may return what a controller returns: str, dict/list (JSON), bytes, a Response, an
#: async iterator (streamed) or None (204).
UserEndpointHandler = Callable[..., Any]

_METHODS = {"get", "post", "put", "patch", "delete"}


class UserEndpointOptions(TypedDict, total=False):
    """The spec's options object, as for the other endpoints."""

    access: UserEndpointAccess


class UserEndpointDefinition(Definition):
    """A handler mounted under ``{prefix}/users/me/``: ``(request, user, params)``, fewer allowed."""

    handler: Callable[..., Any]
    access: UserEndpointAccess = "authenticated"
    accepts: int = 3

    async def __call__(self, request: Any, user: Any, params: dict[str, str]) -> Any:
        result = self.handler(*(request, user, params)[: self.accepts])
        if inspect.isawaitable(result):
            result = await result
        return result


#: the spec's name for a handler marked as a user endpoint
MarkedUserEndpoint = UserEndpointDefinition


def _access(options: Mapping[str, Any] | None, access: str | None) -> UserEndpointAccess:
    value = access or (options or {}).get("access") or "authenticated"
    if value == "authenticated":
        return "authenticated"
    if value == "public":
        raise DefinitionError([("access", "a user endpoint serves the caller's own user scope (/users/me), so it "
                                          "needs a caller: 'public' is not allowed (use define_controller for a "
                                          "route anonymous callers may use)")])
    raise DefinitionError([("access", f"{value!r} is not an access level (a user endpoint is 'authenticated')")])


def _make(handler: Callable[..., Any], access: UserEndpointAccess) -> UserEndpointDefinition:
    if not callable(handler):
        raise DefinitionError([("handler", f"a user endpoint's handler must be callable, not {type(handler).__name__}")])
    params = [p for p in inspect.signature(handler).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return UserEndpointDefinition(handler=handler, access=access, accepts=min(len(params), 3))


@overload
def define_user_endpoint(handler: Callable[..., Any], options: UserEndpointOptions | None = None, *,
                         access: UserEndpointAccess | None = None) -> UserEndpointDefinition: ...
@overload
def define_user_endpoint(handler: None = None, options: UserEndpointOptions | None = None, *,
                         access: UserEndpointAccess | None = None) -> Callable[[Callable[..., Any]], UserEndpointDefinition]: ...
def define_user_endpoint(
    handler: Callable[..., Any] | None = None, options: UserEndpointOptions | None = None, *,
    access: UserEndpointAccess | None = None,
) -> UserEndpointDefinition | Callable[[Callable[..., Any]], UserEndpointDefinition]:
    """Define a user endpoint (usable as a decorator). Its route is its file's path under
    ``agents/api/``, mounted under ``{prefix}/users/me/``."""
    level = _access(options, access)
    if handler is None:
        return lambda fn: _make(fn, level)
    return _make(handler, level)


#: the spec's camelCase name
defineUserEndpoint = define_user_endpoint


def is_user_endpoint(value: Any) -> bool:
    """Whether ``value`` was made with :func:`define_user_endpoint`."""
    return isinstance(value, UserEndpointDefinition)


isUserEndpoint = is_user_endpoint


def user_route(key: str) -> tuple[str, str | None]:
    """The route an endpoint key (a file's path under ``agents/api/`` without ``.py``) gives,
    as ``(shape, method)``: parameters are unnamed in the shape (``items/[]``), a trailing
    ``index`` is the folder itself, and the method is ``None`` when the key has no suffix."""
    segments = [s for s in key.split("/") if s]
    method = None
    if segments:
        stem, dot, suffix = segments[-1].rpartition(".")
        if dot and suffix.lower() in _METHODS:
            method, segments[-1] = suffix.upper(), stem
    if segments and segments[-1] == "index":
        segments.pop()
    shape = "/".join("[]" if s.startswith("[") and s != "[*]" else s for s in segments)
    return shape, method


def routes_collide(a: str, b: str) -> bool:
    """Whether two endpoint keys answer the same requests: the same shape, and the same
    method or one of them answering every method (one could never be reached)."""
    (shape_a, method_a), (shape_b, method_b) = user_route(a), user_route(b)
    return shape_a == shape_b and (method_a == method_b or method_a is None or method_b is None)
