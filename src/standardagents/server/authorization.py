"""Where access is decided: the built-in policy (a thread's owner, or an admin) and the
project's authorization handler (``define_authorization``) asked on top of it.

Every route and door asks here (through :func:`~standardagents.server.auth.require_thread`,
:func:`thread_allowed` and :func:`thread_scope`), so a handler's rule holds alike over REST,
streams, the OpenAI door, MCP, A2A, AG-UI and the web app. Threads carry the caller's tenant
in their metadata (:data:`TENANT_KEY`), stamped at creation from the caller's identity: a
client cannot choose it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..definitions.authorization import (
    Allow,
    AuthorizationAction,
    AuthorizationCaller,
    AuthorizationDefinition,
    AuthorizationRequest,
    AuthorizationResource,
    Deny,
    Narrow,
)
from ..exceptions import AccessDenied
from ..records import ThreadRecord
from ..store.base import UserRecord

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = [
    "TENANT_KEY",
    "ThreadScope",
    "agent_listed",
    "authorize",
    "caller_view",
    "default_thread_access",
    "handler_of",
    "list_scoped_threads",
    "memory_allowed",
    "require_allowed",
    "tenant_of",
    "tenant_rows",
    "thread_allowed",
    "thread_metadata",
    "thread_resource",
    "thread_scope",
]

#: the thread metadata key holding the tenant of the caller who created it
TENANT_KEY = "tenant"


def tenant_of(caller: UserRecord | None) -> str | None:
    """The caller's tenant (from an identity provider's token), or None."""
    tenant = getattr(caller, "tenant", None)
    return tenant if isinstance(tenant, str) else None


def caller_view(caller: UserRecord | None) -> AuthorizationCaller | None:
    """The caller as a handler sees it."""
    if caller is None:
        return None
    return AuthorizationCaller(id=caller.id, name=caller.name, is_admin=caller.is_admin, email=caller.email,
                               tenant=tenant_of(caller), roles=tuple(getattr(caller, "roles", ()) or ()),
                               claims=dict(getattr(caller, "claims", {}) or {}))


def thread_resource(thread: ThreadRecord, kind: str = "thread", resource_id: str | None = None) -> AuthorizationResource:
    """A thread (or a file or approval of it) as a handler sees it."""
    return AuthorizationResource(kind=kind, id=resource_id or thread.id, owner=thread.user_id,  # type: ignore[arg-type]
                                 metadata=dict(thread.metadata), agent=thread.agent, thread_id=thread.id)


def default_thread_access(caller: UserRecord | None, thread: ThreadRecord) -> bool:
    """The built-in policy: the thread's owner, or an admin; with tenants, never across them."""
    if caller is None:
        return False
    tenant = tenant_of(caller)
    if tenant is not None and thread.metadata.get(TENANT_KEY) not in (None, tenant):
        return False
    return caller.is_admin or (thread.user_id is not None and thread.user_id == caller.id)


def handler_of(rt: Runtime) -> AuthorizationDefinition | None:
    """The project's authorization handler, when it defines one."""
    entries = rt.registry.entries("authorizations")
    if not entries:
        return None
    value = entries[0].value
    return value if isinstance(value, AuthorizationDefinition) else None


async def authorize(rt: Runtime, caller: UserRecord | None, resource: AuthorizationResource,
                    action: AuthorizationAction, default: bool) -> Allow | Deny | Narrow | None:
    """The handler's answer (None without a handler, or when it has no opinion)."""
    handler = handler_of(rt)
    if handler is None:
        return None
    return await handler.decide(AuthorizationRequest(caller_view(caller), resource, action, default))


def _allowed(answer: Allow | Deny | Narrow | None, default: bool, metadata: Mapping[str, Any]) -> bool:
    if answer is None:
        return default
    if isinstance(answer, Narrow):
        return answer.matches(metadata)
    return isinstance(answer, Allow)


async def thread_allowed(rt: Runtime, caller: UserRecord | None, thread: ThreadRecord,
                         action: AuthorizationAction = "read", *, kind: str = "thread",
                         resource_id: str | None = None) -> bool:
    """Whether the caller may do ``action`` on the thread (or its file or approval)."""
    default = default_thread_access(caller, thread)
    handler = handler_of(rt)
    if handler is None:
        return default
    answer = await handler.decide(AuthorizationRequest(caller_view(caller), thread_resource(thread, kind, resource_id),
                                                       action, default))
    return _allowed(answer, default, thread.metadata)


async def require_allowed(rt: Runtime, caller: UserRecord | None, thread: ThreadRecord,
                          action: AuthorizationAction = "read", *, kind: str = "thread",
                          resource_id: str | None = None) -> None:
    """:class:`AccessDenied` (with the handler's reason) unless the caller may do it."""
    default = default_thread_access(caller, thread)
    handler = handler_of(rt)
    answer = None
    if handler is not None:
        answer = await handler.decide(AuthorizationRequest(
            caller_view(caller), thread_resource(thread, kind, resource_id), action, default))
    if _allowed(answer, default, thread.metadata):
        return
    if isinstance(answer, Deny):
        raise AccessDenied(f"you may not {action} {kind} {resource_id or thread.id!r}: {answer.reason}")
    if answer is None:
        tenant, held = tenant_of(caller), thread.metadata.get(TENANT_KEY)
        whose = "another tenant" if tenant is not None and held not in (None, tenant) else "another user"
        raise AccessDenied(f"you may not access thread {thread.id!r} (it belongs to {whose})")
    raise AccessDenied(f"you may not {action} {kind} {resource_id or thread.id!r} (the authorization policy "
                       "does not grant it)")


@dataclass(frozen=True, slots=True)
class ThreadScope:
    """Which threads a caller's list shows: one owner's (``user_id``), or every thread whose
    metadata holds ``metadata`` (a handler's :class:`Narrow`); ``None`` fields mean any."""

    user_id: str | None
    metadata: Mapping[str, Any] | None = None

    def admits(self, thread: ThreadRecord) -> bool:
        if self.user_id is not None and thread.user_id != self.user_id:
            return False
        held = thread.metadata
        return self.metadata is None or all(k in held and held[k] == v for k, v in self.metadata.items())


async def thread_scope(rt: Runtime, caller: UserRecord, requested_user: str | None = None) -> ThreadScope:
    """The threads the caller may list (a non-admin asking for another user's is refused)."""
    tenant = tenant_of(caller)
    tenant_filter = {TENANT_KEY: tenant} if tenant is not None else None
    default_user = requested_user if caller.is_admin else caller.id
    default_ok = caller.is_admin or requested_user in (None, caller.id)
    answer = await authorize(rt, caller, AuthorizationResource(kind="thread", owner=requested_user), "list", default_ok)
    if answer is None:
        if not default_ok:
            raise AccessDenied("you may only list your own threads")
        return ThreadScope(default_user, tenant_filter)
    if isinstance(answer, Deny):
        raise AccessDenied(f"you may not list threads: {answer.reason}")
    if isinstance(answer, Narrow):
        return ThreadScope(requested_user, dict(answer.metadata))
    return ThreadScope(requested_user, None)


async def thread_metadata(rt: Runtime, caller: UserRecord | None, agent: str,
                          metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A new thread's metadata: the client's, with the caller's tenant stamped over it (a caller
    without a tenant cannot name one, unless an admin); the handler is asked whether the caller may create a thread of ``agent`` (``AccessDenied``)."""
    out = dict(metadata or {})
    tenant = tenant_of(caller)
    if tenant is not None:
        out[TENANT_KEY] = tenant
    elif caller is None or not caller.is_admin:
        out.pop(TENANT_KEY, None)  # only an admin files a thread under a tenant it does not belong to
    answer = await authorize(rt, caller, AuthorizationResource(kind="thread", owner=getattr(caller, "id", None),
                                                               metadata=out, agent=agent), "create", caller is not None)
    if answer is not None and not _allowed(answer, caller is not None, out):
        reason = answer.reason if isinstance(answer, Deny) else "the authorization policy does not grant it"
        raise AccessDenied(f"you may not create a thread of agent {agent!r}: {reason}")
    return out


async def list_scoped_threads(rt: Runtime, scope: ThreadScope, *, agent: str | None = None, top_level: bool = False,
                              limit: int = 50, offset: int = 0) -> list[ThreadRecord]:
    """The threads ``scope`` admits, newest first (the store filters by owner; metadata is
    matched here, page by page, until the window is filled)."""
    if scope.metadata is None:
        return await rt.store.list_threads(agent=agent, user_id=scope.user_id, top_level=top_level,
                                           limit=limit, offset=offset)
    found: list[ThreadRecord] = []
    skipped, page, size = 0, 0, 200
    while len(found) < limit:
        batch = await rt.store.list_threads(agent=agent, user_id=scope.user_id, top_level=top_level,
                                            limit=size, offset=page * size)
        for thread in batch:
            if not scope.admits(thread):
                continue
            if skipped < offset:
                skipped += 1
            elif len(found) < limit:
                found.append(thread)
        if len(batch) < size:
            break
        page += 1
    return found


async def memory_allowed(rt: Runtime, caller: UserRecord, namespace: tuple[str, ...], action: AuthorizationAction,
                         default: bool) -> bool:
    """Whether the caller may do ``action`` in a memory namespace: the handler's answer on a
    ``memory`` resource (its id the dotted namespace, its owner the user of a ``user.ID...``
    namespace, its metadata ``{"namespace": [...]}``), else ``default``."""
    metadata = {"namespace": list(namespace)}
    owner = namespace[1] if len(namespace) >= 2 and namespace[0] == "user" else None
    answer = await authorize(rt, caller, AuthorizationResource(kind="memory", id=".".join(namespace), owner=owner,
                                                               metadata=metadata), action, default)
    return _allowed(answer, default, metadata)


async def tenant_rows(rt: Runtime, caller: UserRecord, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Usage rows (each with its ``thread_id``) of the caller's tenant only; all of them for a
    caller without a tenant. Usage carries the tenant of its thread."""
    tenant = tenant_of(caller)
    if tenant is None:
        return rows
    tenants: dict[str, Any] = {}
    for thread_id in {r["thread_id"] for r in rows}:
        thread = await rt.store.get_thread(thread_id)
        tenants[thread_id] = thread.metadata.get(TENANT_KEY) if thread is not None else None
    return [r for r in rows if tenants.get(r["thread_id"]) == tenant]


async def agent_listed(rt: Runtime, caller: UserRecord, name: str) -> bool:
    """Whether an agent is listed to the caller (the handler asked on an ``agent`` resource)."""
    answer = await authorize(rt, caller, AuthorizationResource(kind="agent", id=name, agent=name), "list", True)
    return _allowed(answer, True, {})
