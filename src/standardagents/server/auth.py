"""Who is calling: bearer API tokens, the dev-mode local user, and the thread access policy.

The spec's two access levels are enforced here: ``authenticated`` rejects a request without
verified credentials (401) before any handler runs; ``public`` still resolves a caller when
the credentials verify and treats every other request as anonymous.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection

from ..records import ThreadRecord
from ..store.base import UserRecord
from ..store.ops import TOKEN_PREFIX
from .errors import ApiError
from .state import ServerState, server_of

__all__ = [
    "LOCAL_USER_ID",
    "TOKEN_CACHE_SECONDS",
    "Resolution",
    "ThreadEndpointAuth",
    "authenticate",
    "caller_dict",
    "can_access_thread",
    "require_thread",
    "resolve_caller",
]

#: the user a dev server attributes credential-less requests to
LOCAL_USER_ID = "local"
#: how long a verified token is trusted without asking the store again (a revocation
#: made by another process takes effect within this time)
TOKEN_CACHE_SECONDS = 5.0


@dataclass(slots=True)
class Resolution:
    """The verified caller (or None) and whether the request presented credentials at all."""

    caller: UserRecord | None
    presented: bool


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
        message = ("the API token is not valid (revoked, mistyped, or made for another project's database: "
                   f"'standardagents tokens list --project {project}' shows this server's tokens)"
                   if resolution.presented
                   else "this route needs an API token: send 'Authorization: Bearer <token>' "
                        f"(create one with 'standardagents tokens create USER --project {project}')")
        raise ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})
    return resolution.caller


def can_access_thread(caller: UserRecord | None, thread: ThreadRecord) -> bool:
    """The thread access policy: the thread's owner, or an admin."""
    if caller is None:
        return False
    return caller.is_admin or (thread.user_id is not None and thread.user_id == caller.id)


async def require_thread(conn: HTTPConnection, thread_id: str, caller: UserRecord) -> ThreadRecord:
    """The thread if it exists (404) and the caller may use it (403)."""
    thread = await server_of(conn).runtime.store.get_thread(thread_id)
    if thread is None:
        raise ApiError(404, f"unknown thread {thread_id!r}")
    if not can_access_thread(caller, thread):
        raise ApiError(403, f"you may not access thread {thread_id!r} (it belongs to another user)")
    return thread
