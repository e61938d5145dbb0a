"""The OpenAPI document names every route the user module mounts (the credential grants too),
with each method the route answers; the fuzz test (test_server_openapi_fuzz.py) then drives them."""

from __future__ import annotations

from starlette.routing import Route

from standardagents.server.openapi import openapi_document
from standardagents.server.users import user_routes


def test_every_user_route_is_in_the_openapi_document_with_its_methods() -> None:
    paths = openapi_document("/api")["paths"]
    mounted = {(r.path, m.lower()) for r in user_routes("/api") if isinstance(r, Route) for m in (r.methods or ())
               if m != "HEAD"}
    documented = {(path, method) for path, ops in paths.items() for method in ops}
    assert sorted(mounted - documented) == []
    assert sorted(p for p, _ in mounted) == ["/api/users/me/grants"] * 2 + ["/api/users/me/grants/{name}"] * 2
