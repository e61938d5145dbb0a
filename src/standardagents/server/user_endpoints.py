"""The project's user endpoints, served at ``{prefix}/users/me/{path}``.

Routed from their file names as the other endpoints are (``[id]``, ``[*]``, ``index``, a
method suffix). A user endpoint is ``authenticated``: a request without verified
credentials is a 401 before the handler runs, and the handler gets the caller's
``UserState``. The built-in user routes (``values``, ``stream``, ``grants``...) answer first;
a user endpoint one of them always hides is logged at start-up and listed in ``collisions``.
Packed user endpoints mount at the same prefix as the project's own (the project's win a tie).
A path no user endpoint answers goes on to the project's controllers, so a controller file
under ``agents/api/users/me/`` keeps working.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route

from ..registry import Registry
from .auth import authenticate
from .endpoints import EndpointRoute, dispatch_controller, parse_route, to_response
from .errors import ApiError, StrictJSONRequest
from .state import ServerState, server_of
from .users import UserState

__all__ = ["UserEndpointTable", "dispatch_user_endpoint", "user_endpoint_route", "user_endpoints_of"]

log = logging.getLogger("standardagents.server")

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_KEY = "user_endpoints"


class UserEndpointTable:
    """The user endpoints of one project version, most specific first."""

    def __init__(self, registry: Registry, prefix: str = "/api", builtins: Sequence[BaseRoute] = ()) -> None:
        self.registry = registry
        self.routes = [parse_route(e.name, "user_endpoints", e.package) for e in registry.all_entries("user_endpoints")]
        # the project's own endpoints before packed ones at the same specificity
        self.routes.sort(key=lambda r: (r.rank(), r.package is not None, r.package or "", r.key))
        self.collisions = self._shadowed(prefix, builtins)
        for text in self.collisions:
            log.error("route collision: %s", text)

    def _shadowed(self, prefix: str, builtins: Sequence[BaseRoute]) -> list[str]:
        found = []
        for route in self.routes:
            sample = "/".join("param/rest" if s == "[*]" else "param" if s.startswith("[") else s for s in route.segments)
            path = f"{prefix}/users/me/{sample}".rstrip("/")
            for method in [route.method] if route.method else ["GET", "POST", "PUT", "PATCH", "DELETE"]:
                scope = {"type": "http", "path": path, "method": method, "root_path": ""}
                hit = next((b for b in builtins if isinstance(b, Route) and b.matches(scope)[0] == Match.FULL), None)
                if hit is not None:
                    where = f"package {route.package}" if route.package else "the project"
                    found.append(f"user endpoint {route.key!r} ({where}) is hidden by the built-in route "
                                 f"{method} {hit.path}: rename or move the endpoint")
        return found

    def find(self, path: str, method: str) -> tuple[EndpointRoute, dict[str, str]] | bool | None:
        """The matching route and its params; ``False`` when the path matches only with
        another method; ``None`` when nothing matches."""
        parts = [p for p in path.split("/") if p]
        wrong_method = False
        for route in self.routes:
            params = route.match(parts)
            if params is None:
                continue
            if route.method is None or route.method == method or (route.method == "GET" and method == "HEAD"):
                return route, params
            wrong_method = True
        return False if wrong_method else None


def user_endpoints_of(server: ServerState) -> UserEndpointTable:
    """The table for the project version the runtime uses now (rebuilt after a reload, so
    new, changed and removed endpoint files take effect)."""
    table: UserEndpointTable | None = server.extra.get(_KEY)
    if table is None or table.registry is not server.runtime.registry:
        table = server.extra[_KEY] = UserEndpointTable(server.runtime.registry, server.prefix,
                                                       server.extra.get("builtins", ()))
    return table


async def dispatch_user_endpoint(request: Request) -> Response:
    """``{prefix}/users/me/{path}``: a user endpoint, else the project's controllers."""
    request = StrictJSONRequest(request.scope, request.receive, request._send)
    server = server_of(request)
    path = request.path_params["path"]
    found = user_endpoints_of(server).find(path, request.method)
    if found is None:
        scope = {**request.scope, "path_params": {"path": f"users/me/{path}"}}
        return await dispatch_controller(Request(scope, request.receive, request._send))
    if found is False:
        raise ApiError(405, f"{request.method} is not allowed on {request.url.path}")
    assert isinstance(found, tuple)
    route, params = found
    caller = await authenticate(request)
    definition = await server.runtime.registry.aget("user_endpoints", route.key, route.package)
    result = await definition(request, UserState(server.hub, caller), params)
    return to_response(result)


def user_endpoint_route(prefix: str) -> Route:
    """The route that serves the user endpoints (mounted after the built-in user routes)."""
    return Route(f"{prefix}/users/me/{{path:path}}", dispatch_user_endpoint, methods=list(_METHODS))
