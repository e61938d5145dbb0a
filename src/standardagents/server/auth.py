"""Who is calling: bearer API tokens, an identity provider's JWTs (:mod:`.oidc`), the dev-mode
local user, and the thread access policy (decided in :mod:`.authorization`).

The spec's two access levels are enforced here: ``authenticated`` rejects a request without
verified credentials (401) before any handler runs; ``public`` still resolves a caller when
the credentials verify and treats every other request as anonymous.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from ..engine.approval_tokens import Decider, current_decider
from ..exceptions import AccessDenied, AuthenticationFailed
from ..records import ThreadRecord
from ..store.base import UserRecord
from ..store.ops import TOKEN_PREFIX
from .authorization import default_thread_access, require_allowed
from .errors import ApiError
from .oidc import OidcSettings, looks_like_jwt
from .state import ServerState, server_of

if TYPE_CHECKING:
    from .jwt_verifier import JwtVerifier

__all__ = [
    "LOCAL_USER_ID",
    "TOKEN_CACHE_SECONDS",
    "Resolution",
    "ThreadEndpointAuth",
    "authenticate",
    "caller_dict",
    "can_access_thread",
    "decider_of",
    "jwt_verifier",
    "require_thread",
    "resolve_caller",
]

_QUERY_TOKEN = re.compile(r"([?&]token=)[^&\s]+")


class _RedactTokens(logging.Filter):
    """Streams take their bearer token in the query (``?token=``, for clients that cannot set
    headers); the access log writes the path with it blanked, so no token reaches a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "token=" in a for a in record.args):
            record.args = tuple(_QUERY_TOKEN.sub(r"\1[redacted]", a) if isinstance(a, str) else a
                                for a in record.args)
        return True


logging.getLogger("uvicorn.access").addFilter(_RedactTokens())

#: the user a dev server attributes credential-less requests to
LOCAL_USER_ID = "local"
#: how long a verified token is trusted without asking the store again (a revocation
#: made by another process takes effect within this time)
TOKEN_CACHE_SECONDS = 5.0


@dataclass(slots=True)
class Resolution:
    """The verified caller (or None), whether the request presented credentials at all, and
    why presented credentials were refused."""

    caller: UserRecord | None
    presented: bool
    reason: str | None = None


@dataclass(slots=True)
class ThreadEndpointAuth:
    """The fourth argument of a thread endpoint: the caller and whether it may use the thread."""

    caller: UserRecord | None
    thread_access: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def threadAccess(self) -> bool:
        return self.thread_access

    def to_dict(self) -> dict[str, Any]:
        return {"caller": caller_dict(self.caller), "threadAccess": self.thread_access}


def caller_dict(user: UserRecord | None) -> dict[str, Any] | None:
    """The wire shape of a caller (the spec's ``ThreadUser``)."""
    if user is None:
        return None
    return {"id": user.id, "name": user.name, "email": user.email, "isAdmin": user.is_admin}


def _token_of(conn: HTTPConnection, allow_query: bool) -> str | None:
    header = conn.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else ""
    if allow_query:
        return conn.query_params.get("token")
    return None


async def _local_user(server: ServerState) -> UserRecord:
    if server.local_user is None:
        store = server.runtime.store
        user = await store.get_user(LOCAL_USER_ID)
        if user is None:
            user = await store.create_user("local", is_admin=True, user_id=LOCAL_USER_ID)
        server.local_user = user
    return server.local_user


def jwt_verifier(server: ServerState) -> JwtVerifier | None:
    """The verifier of identity-provider tokens (``STANDARDAGENTS_AUTH_*``), None when none is
    configured; built once per server."""
    verifier = server.extra.get("oidc", False)
    if verifier is False:
        settings = OidcSettings.from_env()
        if settings.enabled:
            from .jwt_verifier import JwtVerifier
            verifier = JwtVerifier(settings)
        else:
            verifier = None
        server.extra["oidc"] = verifier
    return verifier


async def resolve_caller(conn: HTTPConnection, *, allow_query: bool = False) -> Resolution:
    """Verify the request's credentials; in dev mode a request without any is the local admin,
    and so is one whose bearer key is not an API token at all (clients such as the OpenAI SDK
    refuse to run without some key: ``api_key="dev"`` is enough). A key shaped like an API
    token (``sat_...``) is always verified, so a mistyped or revoked one is still refused."""
    server = server_of(conn)
    token = _token_of(conn, allow_query)
    if token is None:
        if server.dev:
            return Resolution(await _local_user(server), False)
        return Resolution(None, False)
    if not token:
        return Resolution(None, True)
    verifier = jwt_verifier(server) if not token.startswith(TOKEN_PREFIX) else None
    if verifier is not None and looks_like_jwt(token):
        try:
            return Resolution(await verifier.verify(token), True)
        except AuthenticationFailed as exc:
            return Resolution(None, True, str(exc))
    if server.dev and not token.startswith(TOKEN_PREFIX):
        return Resolution(await _local_user(server), True)
    cache: dict[str, tuple[float, UserRecord]] = server.extra.setdefault("token_cache", {})
    now = time.monotonic()
    hit = cache.get(token)
    if hit is not None and now - hit[0] < TOKEN_CACHE_SECONDS:
        return Resolution(hit[1], True)
    user = await server.runtime.store.verify_api_token(token)
    if user is None:
        cache.pop(token, None)
    else:
        if len(cache) > 10_000:
            cache.clear()
        cache[token] = (now, user)
    return Resolution(user, True)


async def authenticate(conn: HTTPConnection, *, allow_query: bool = False) -> UserRecord:
    """The verified caller, or 401 before anything else happens."""
    resolution = await resolve_caller(conn, allow_query=allow_query)
    if resolution.caller is None:
        root = getattr(getattr(getattr(conn.app.state, "server", None), "runtime", None), "registry", None)
        project = str(getattr(root, "root", None) or "PROJECT")
        message = (resolution.reason if resolution.reason is not None
                   else "the API token is not valid (revoked, mistyped, or made for another project's database: "
                   f"'standardagents tokens list --project {project}' shows this server's tokens)"
                   if resolution.presented
                   else "this route needs an API token: send 'Authorization: Bearer <token>' "
                        f"(create one with 'standardagents tokens create USER --project {project}')")
        challenge = "Bearer" if resolution.reason is None else 'Bearer error="invalid_token"'
        raise ApiError(401, message, headers={"WWW-Authenticate": challenge})
    caller = resolution.caller
    # an approval decided while serving this request is attributed to this caller
    current_decider.set(decider_of(caller))
    return caller


def decider_of(caller: UserRecord) -> Decider:
    """The caller as an approval's audit records them."""
    return Decider(caller.id, caller.name, caller.is_admin, getattr(caller, "tenant", None),
                   tuple(getattr(caller, "roles", ())), dict(getattr(caller, "claims", {})))


def can_access_thread(caller: UserRecord | None, thread: ThreadRecord) -> bool:
    """The built-in thread access policy: the thread's owner, or an admin (never across tenants).
    Routes ask :func:`require_thread`, which asks the project's authorization handler too."""
    return default_thread_access(caller, thread)


_ACTIONS = {"GET": "read", "HEAD": "read", "DELETE": "delete"}


async def require_thread(conn: HTTPConnection, thread_id: str, caller: UserRecord) -> ThreadRecord:
    """The thread if it exists (404) and the caller may use it (403): reading for ``GET`` (and
    streams), deleting for ``DELETE``, writing otherwise, as the policy and the handler say."""
    thread = await server_of(conn).runtime.store.get_thread(thread_id)
    if thread is None:
        raise ApiError(404, f"unknown thread {thread_id!r}")
    method = conn.scope.get("method") or "GET"
    try:
        await require_allowed(server_of(conn).runtime, caller, thread, _ACTIONS.get(method, "write"))  # type: ignore[arg-type]
    except AccessDenied as exc:
        raise ApiError(403, str(exc)) from None
    return thread
