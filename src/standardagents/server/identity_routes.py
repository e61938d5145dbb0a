"""Routes of identity: the audit of approval decisions (admins), and what the web app needs to
sign in through the identity provider (its settings, and the code-for-token exchange made by
the server, so the page talks to its own origin only).

The web app uses the authorization-code flow with PKCE: it sends the browser to the provider's
authorization endpoint with a code challenge, and hands the code and its verifier to
``POST {prefix}/auth/token``, which the server exchanges at the provider's token endpoint.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..store.identityops import list_approval_decisions
from .auth import authenticate, jwt_verifier
from .authorization import tenant_of
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

__all__ = ["identity_routes"]

_MAX_LIMIT = 1000


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(422, f"query parameter {name!r} must be an integer between {low} and {high} (got {raw!r})")
    return int(raw)


async def approvals_audit(request: Request) -> Response:
    """``GET {prefix}/approvals/audit``: decided calls, newest first (admins only; an admin of a
    tenant sees that tenant's); ``?thread=``, ``limit``, ``offset``."""
    caller = await authenticate(request)
    if not caller.is_admin:
        raise ApiError(403, "only an admin may read the audit of approval decisions")
    limit = _int(request, "limit", 100, 1, _MAX_LIMIT)
    offset = _int(request, "offset", 0, 0, 1 << 62)
    records = await list_approval_decisions(server_of(request).runtime.store, tenant=tenant_of(caller),
                                            thread_id=request.query_params.get("thread") or None,
                                            limit=limit, offset=offset)
    return JSONResponse({"decisions": [r.to_dict() for r in records], "limit": limit, "offset": offset})


async def auth_config(request: Request) -> Response:
    """``GET {prefix}/auth/config`` (public): whether the web app signs in through an identity
    provider, and where (its authorization endpoint, client id and scopes)."""
    verifier = jwt_verifier(server_of(request))
    if verifier is None or not verifier.settings.client_id or not verifier.settings.issuer:
        return JSONResponse({"oidc": False})
    try:
        document = await verifier.discover()
    except Exception as exc:
        raise ApiError(502, f"the identity provider cannot be reached: {exc}") from None
    return JSONResponse({"oidc": True, "issuer": verifier.settings.issuer,
                         "authorizationEndpoint": document.get("authorization_endpoint"),
                         "clientId": verifier.settings.client_id, "scopes": verifier.settings.scopes})


def _post_form(url: str, form: dict[str, str]) -> tuple[int, Any]:
    data = urllib.parse.urlencode(form).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/x-www-form-urlencoded",
                                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.load(exc)
        except ValueError:
            return exc.code, {}
        finally:
            exc.close()


async def auth_token(request: Request) -> Response:
    """``POST {prefix}/auth/token`` (public) with ``{code, codeVerifier, redirectUri}``: the
    provider's tokens for an authorization code (PKCE), exchanged by the server."""
    verifier = jwt_verifier(server_of(request))
    if verifier is None or not verifier.settings.client_id:
        raise ApiError(404, "sign-in through an identity provider is not configured "
                            "(STANDARDAGENTS_AUTH_ISSUER and STANDARDAGENTS_AUTH_CLIENT_ID)")
    body = await read_json(request)
    for name in ("code", "codeVerifier", "redirectUri"):
        if not isinstance(body.get(name), str) or not body[name]:
            raise ApiError(422, f"field {name!r} is required (a string)")
    endpoint = (await verifier.discover()).get("token_endpoint")
    if not isinstance(endpoint, str):
        raise ApiError(502, "the identity provider's discovery document names no token_endpoint")
    status, answer = await asyncio.to_thread(_post_form, endpoint, {
        "grant_type": "authorization_code", "code": body["code"], "code_verifier": body["codeVerifier"],
        "redirect_uri": body["redirectUri"], "client_id": verifier.settings.client_id})
    if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        error = answer.get("error") if isinstance(answer, dict) else None
        raise ApiError(401, f"the identity provider refused the sign-in ({error or status})")
    identity = await verifier.verify(answer["access_token"])
    return JSONResponse({"accessToken": answer["access_token"], "expiresIn": answer.get("expires_in"),
                         "user": {"id": identity.id, "name": identity.name, "isAdmin": identity.is_admin,
                                  "tenant": identity.tenant}})


def identity_routes(prefix: str) -> list[BaseRoute]:
    return [
        Route(f"{prefix}/approvals/audit", approvals_audit, methods=["GET"]),
        Route(f"{prefix}/auth/config", auth_config, methods=["GET"]),
        Route(f"{prefix}/auth/token", auth_token, methods=["POST"]),
    ]
