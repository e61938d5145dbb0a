"""The project's own HTTP endpoints: controllers at ``{prefix}/{path}`` and thread endpoints
at ``{prefix}/threads/{threadId}/{path}``, routed from their file names.

A file name gives the route: ``[id]`` is a parameter, ``[*]`` the rest of the path, ``index``
the folder itself, and a ``.get/.post/.put/.patch/.delete`` suffix restricts the method.
Static segments win over parameters, parameters over a catch-all. Access levels follow the
spec: ``authenticated`` (the default) rejects before the handler runs, ``public`` always runs.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Match

from ..registry import Registry
from ..store.base import UserRecord
from .auth import ThreadEndpointAuth, authenticate, resolve_caller
from .authorization import thread_allowed
from .errors import ApiError, StrictJSONRequest
from .state import server_of

__all__ = ["ControllerContext", "EndpointRoute", "EndpointTable", "shadowed_thread_endpoints", "to_response"]

log = logging.getLogger("standardagents.server")

_METHODS = {"get", "post", "put", "patch", "delete"}


@dataclass(slots=True)
class EndpointRoute:
    """One routed endpoint: its pattern segments, method and where it came from."""

    key: str
    segments: list[str]
    method: str | None
    kind: str
    package: str | None

    @property
    def pattern(self) -> str:
        return "/".join(self.segments)

    def rank(self) -> tuple[int, ...]:
        # lower sorts first: static segments before parameters before the catch-all
        return (*tuple(2 if s == "[*]" else 1 if s.startswith("[") else 0 for s in self.segments), 3)

    def match(self, parts: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for i, seg in enumerate(self.segments):
            if seg == "[*]":
                rest = parts[i:]
                if not rest:
                    return None
                params["*"] = "/".join(rest)
                return params
            if i >= len(parts):
                return None
            if seg.startswith("[") and seg.endswith("]"):
                params[seg[1:-1]] = parts[i]
            elif seg != parts[i]:
                return None
        return params if len(parts) == len(self.segments) else None


def parse_route(key: str, kind: str, package: str | None) -> EndpointRoute:
    """Segments and method of a registry key such as ``users/[id].get``."""
    segments = [s for s in key.split("/") if s]
    method = None
    if segments:
        stem, dot, suffix = segments[-1].rpartition(".")
        if dot and suffix.lower() in _METHODS:
            method = suffix.upper()
            segments[-1] = stem
    if segments and segments[-1] == "index":
        segments.pop()
    return EndpointRoute(key, segments, method, kind, package)


def _sample_path(route: EndpointRoute) -> str:
    """A path the route matches whatever its parameters are (used to find shadowed routes)."""
    return "/".join("param/rest" if s == "[*]" else "param" if s.startswith("[") else s for s in route.segments)


def shadowed_thread_endpoints(registry: Registry, prefix: str = "/api") -> list[str]:
    """Thread endpoints a built-in thread route always answers instead (for some method), as
    messages naming both: such an endpoint could never be reached with that method."""
    from starlette.routing import Route

    from .api import api_routes

    builtins = [r for r in api_routes(prefix) if isinstance(r, Route) and r.path.startswith(f"{prefix}/threads/{{thread_id}}")]
    found = []
    for entry in registry.all_entries("thread_endpoints"):
        route = parse_route(entry.name, "thread_endpoints", entry.package)
        path = f"{prefix}/threads/thr_sample/{_sample_path(route)}".rstrip("/")
        methods = [route.method] if route.method else sorted(m.upper() for m in _METHODS)
        hits: dict[str, list[str]] = {}
        for method in methods:
            scope = {"type": "http", "path": path, "method": method, "root_path": ""}
            for builtin in builtins:
                if builtin.matches(scope)[0] == Match.FULL:
                    hits.setdefault(builtin.path, []).append(method)
                    break
        for builtin_path, hit_methods in hits.items():
            where = entry.source or (f"package {entry.package}" if entry.package else "the project")
            found.append(f"thread endpoint {entry.name!r} ({where}) is hidden by the built-in route "
                         f"{'/'.join(hit_methods)} {builtin_path}: rename or move the endpoint")
    return found


class EndpointTable:
    """The project's routed endpoints of one kind, ordered by specificity."""

    def __init__(self, registry: Registry, prefix: str = "/api") -> None:
        self.registry = registry
        self.controllers = self._build("controllers")
        self.thread_endpoints = self._build("thread_endpoints")
        self.collisions: list[str] = []
        for routes in (self.controllers, self.thread_endpoints):
            self.collisions.extend(self._collisions(routes))
        self.collisions.extend(shadowed_thread_endpoints(registry, prefix))
        for text in self.collisions:
            log.error("route collision: %s", text)

    def _build(self, kind: str) -> list[EndpointRoute]:
        routes = [parse_route(e.name, kind, e.package) for e in self.registry.all_entries(kind)]
        # the project's own endpoints before packed ones at the same specificity
        routes.sort(key=lambda r: (r.rank(), r.package is not None, r.package or "", r.key))
        return routes

    @staticmethod
    def _collisions(routes: list[EndpointRoute]) -> list[str]:
        seen: dict[tuple[str, str | None], EndpointRoute] = {}
        found = []
        for route in routes:
            shape = "/".join("[]" if s.startswith("[") and s != "[*]" else s for s in route.segments)
            key = (shape, route.method)
            other = seen.get(key)
            if other is not None:
                where = lambda r: f"{r.key!r} ({'package ' + r.package if r.package else 'project'})"  # noqa: E731
                found.append(f"{route.kind} {where(route)} has the same route as {where(other)}; "
                             f"{where(other)} answers")
            else:
                seen[key] = route
        return found

    def find(self, kind: str, path: str, method: str) -> tuple[EndpointRoute, dict[str, str]] | bool | None:
        """The matching route and its params; ``False`` when the path matches only with
        another method (405); ``None`` when nothing matches (404)."""
        routes = self.controllers if kind == "controllers" else self.thread_endpoints
        parts = [p for p in path.split("/") if p]
        wrong_method = False
        for route in routes:
            params = route.match(parts)
            if params is None:
                continue
            if route.method is None or route.method == method or (route.method == "GET" and method == "HEAD"):
                return route, params
            wrong_method = True
        return False if wrong_method else None


@dataclass
class ControllerContext:
    """What a controller receives (the spec's ``ControllerContext``), with snake_case names and
    the spec's camelCase ones as aliases."""

    req: Request
    caller: UserRecord | None
    params: dict[str, str]
    url: Any
    env: dict[str, Any]
    agents: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    agent_names: list[str] = field(default_factory=list)
    prompts: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    prompt_names: list[str] = field(default_factory=list)
    models: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    model_names: list[str] = field(default_factory=list)
    tools: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    hooks: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def request(self) -> Request:
        return self.req

    @property
    def agentNames(self) -> list[str]:
        return self.agent_names

    @property
    def promptNames(self) -> list[str]:
        return self.prompt_names

    @property
    def modelNames(self) -> list[str]:
        return self.model_names


def _loaders(registry: Registry, kind: str, namespace: str | None) -> dict[str, Callable[[], Awaitable[Any]]]:
    def loader(name: str) -> Callable[[], Awaitable[Any]]:
        async def load() -> Any:
            return await registry.aget(kind, name, namespace)
        return load

    return {name: loader(name) for name in registry.names(kind, namespace)}


def _context(request: Request, caller: UserRecord | None, params: dict[str, str], namespace: str | None) -> ControllerContext:
    server = server_of(request)
    reg = server.runtime.registry
    return ControllerContext(
        req=request, caller=caller, params=params, url=request.url,
        env={"runtime": server.runtime, "store": server.runtime.store, "registry": reg},
        agents=_loaders(reg, "agents", namespace), agent_names=reg.names("agents", namespace),
        prompts=_loaders(reg, "prompts", namespace), prompt_names=reg.names("prompts", namespace),
        models=_loaders(reg, "models", namespace), model_names=reg.names("models", namespace),
        tools=_loaders(reg, "tools", namespace), hooks=_loaders(reg, "hooks", namespace),
        config={"prefix": server.prefix, "dev": server.dev},
    )


def _json_default(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def to_response(value: Any) -> Response:
    """Turn what a handler returned into a response: str -> text, dict/list -> JSON,
    bytes -> octet-stream, an (async) iterator -> a stream, None -> 204."""
    if isinstance(value, Response):
        return value
    if value is None:
        return Response(status_code=204)
    if isinstance(value, str):
        return PlainTextResponse(value)
    if isinstance(value, bytes | bytearray):
        return Response(bytes(value), media_type="application/octet-stream")
    if isinstance(value, AsyncIterable) or (isinstance(value, Iterable) and inspect.isgenerator(value)):
        async def chunks() -> Any:
            if isinstance(value, AsyncIterable):
                async for item in value:
                    yield item.encode() if isinstance(item, str) else item
            else:
                for item in value:
                    yield item.encode() if isinstance(item, str) else item

        return StreamingResponse(chunks(), media_type="application/octet-stream")
    try:
        body = json.dumps(value, default=_json_default, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ApiError(500, f"the endpoint returned a value that cannot be sent: {exc}") from exc
    return Response(body, media_type="application/json")


def _method_not_allowed_builtin(request: Request, builtins: list[BaseRoute]) -> bool:
    return any(r.matches(request.scope)[0] == Match.PARTIAL for r in builtins)


async def dispatch_controller(request: Request) -> Response:
    """``{prefix}/{path}``: a project controller (after the built-in routes)."""
    request = StrictJSONRequest(request.scope, request.receive, request._send)
    server = server_of(request)
    _follow_reloads(server)
    found = server.endpoints.find("controllers", request.path_params["path"], request.method)
    if not found:
        if found is False or _method_not_allowed_builtin(request, server.extra.get("builtins", [])):
            raise ApiError(405, f"{request.method} is not allowed on {request.url.path}")
        raise ApiError(404, f"no route {request.url.path}")
    assert isinstance(found, tuple)
    route, params = found
    definition = await server.runtime.registry.aget("controllers", route.key, route.package)
    if definition.access == "public":
        caller = (await resolve_caller(request)).caller
    else:
        caller = await authenticate(request)
    result = await definition(_context(request, caller, params, route.package))
    return to_response(result)


def _follow_reloads(server: Any) -> None:
    """Route by the project version the runtime uses now (it changes when the project is
    reloaded), so new, changed and removed endpoint files take effect without a restart."""
    if server.endpoints.registry is not server.runtime.registry:
        server.endpoints = EndpointTable(server.runtime.registry)


async def dispatch_thread_endpoint(request: Request) -> Response:
    """``{prefix}/threads/{id}/{path}``: a project thread endpoint; 404 for anything else
    (a route that exists only with another method included)."""
    request = StrictJSONRequest(request.scope, request.receive, request._send)
    server = server_of(request)
    _follow_reloads(server)
    thread_id = request.path_params["thread_id"]
    found = server.endpoints.find("thread_endpoints", request.path_params["path"], request.method)
    if not found:
        # the spec: a request under the thread prefix that no thread endpoint route matches
        # (with its method) is 404; only a built-in route's other method is 405
        if found is None and _method_not_allowed_builtin(request, server.extra.get("builtins", [])):
            raise ApiError(405, f"{request.method} is not allowed on {request.url.path}")
        raise ApiError(404, f"no thread endpoint {request.method} {request.path_params['path']!r}")
    assert isinstance(found, tuple)
    route, params = found
    definition = await server.runtime.registry.aget("thread_endpoints", route.key, route.package)
    public = definition.access == "public"
    caller = (await resolve_caller(request)).caller if public else await authenticate(request)
    thread = await server.runtime.store.get_thread(thread_id)
    if thread is None:
        raise ApiError(404, f"unknown thread {thread_id!r}")
    access = await thread_allowed(server.runtime, caller, thread, "read" if request.method in ("GET", "HEAD") else "write")
    if not public and not access:
        raise ApiError(403, f"you may not access thread {thread_id!r} (it belongs to another user)")
    state = await server.runtime.state(thread_id)
    result = await definition(request, state, params, ThreadEndpointAuth(caller, access))
    return to_response(result)
