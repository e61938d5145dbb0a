"""The user scope: live user connections, per-user values with the spec's user hooks, the
``UserState`` user endpoints and hooks receive, and the caller's credential grant routes.

A user may hold several live clients (tabs, devices). Attaching or detaching one runs every
registered ``user_client_attached`` / ``user_client_detached`` hook; changing a value runs
``user_value_changed``, whoever wrote it (a user endpoint, a hook, REST). A failing hook is
logged and never breaks the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..credentials import (
    CredentialError,
    get_credential_grant,
    grant_credential,
    list_credential_grants,
    revoke_credential_grant,
)
from ..eventlog import EventLog, user_stream_key
from ..events import END, Event
from ..records import new_id, now_ms
from ..store.base import UserRecord
from .auth import authenticate
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = [
    "ListUserThreadsOptions",
    "ListUserValuesOptions",
    "UserClient",
    "UserHandle",
    "UserHub",
    "UserState",
    "UserThreadSummary",
    "UserValueEntry",
    "user_routes",
]

log = logging.getLogger("standardagents.server.users")


@dataclass(eq=False)
class UserClient:
    """One live connection of a user (the spec's ``UserClientInfo``)."""

    user_id: str
    transport: str
    id: str = field(default_factory=lambda: new_id("cli_"))
    connected_at: int = field(default_factory=now_ms)
    user_agent: str | None = None
    queue: asyncio.Queue[Event] = field(default_factory=lambda: asyncio.Queue(1000))
    dropped: int = 0

    def push(self, event: Event) -> None:
        """Queue an event without waiting; a full queue counts what was lost."""
        if self.dropped and not self.queue.full():
            self.queue.put_nowait(Event("lagged", event.thread_id, {"missed": self.dropped}))
            self.dropped = 0
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    def end(self) -> None:
        """Wake the stream's reader with :data:`~standardagents.events.END` (a shutdown)."""
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(END)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "userId": self.user_id, "transport": self.transport,
                "connectedAt": self.connected_at, "userAgent": self.user_agent}


class ListUserValuesOptions(TypedDict, total=False):
    """Which of a user's values :meth:`UserHandle.list_values` returns (the spec's
    ``ListUserValuesOptions``): keys starting with ``prefix``, at most ``limit`` of them."""

    prefix: str
    limit: int


class ListUserThreadsOptions(TypedDict, total=False):
    """Which of a user's threads :meth:`UserState.list_threads` returns (the spec's
    ``ListUserThreadsOptions``): newest first, of one ``agent``, whose metadata holds every
    key and value of ``metadata`` (None: any agent, any metadata); ``top_level`` (default
    true) leaves out subagents' threads."""

    agent: str | None
    limit: int
    offset: int
    metadata: dict[str, Any] | None
    top_level: bool


@dataclass(frozen=True, slots=True)
class UserValueEntry:
    """One durable value of a user (the spec's ``UserValueEntry``)."""

    key: str
    value: Any

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value}


@dataclass(frozen=True, slots=True)
class UserThreadSummary:
    """One of a user's threads as a list shows it (the spec's ``UserThreadSummary``):
    ``message_count`` counts the messages a person sees (silent ones left out), ``running``
    whether a turn runs now, here or on another worker."""

    id: str
    agent: str
    title: str | None
    created_at: int
    updated_at: int
    message_count: int
    running: bool
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "agent": self.agent, "title": self.title, "createdAt": self.created_at,
                "updatedAt": self.updated_at, "messageCount": self.message_count, "running": self.running,
                "metadata": dict(self.metadata)}


_MAX_LIMIT = 1000


def _limit(options: Mapping[str, Any], name: str, default: int | None, low: int) -> int | None:
    value = options.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= (_MAX_LIMIT if name == "limit" else 1 << 62):
        bound = f"between {low} and {_MAX_LIMIT}" if name == "limit" else f"at least {low}"
        raise ValueError(f"{name}: an integer {bound} (got {value!r})")
    return value


class UserHandle:
    """A user's identity and durable values (the spec's ``UserHandle``). A value written
    here reaches the user's live clients and runs the ``user_value_changed`` hooks, as one
    written over REST does."""

    def __init__(self, hub: UserHub, user: UserRecord) -> None:
        self.hub = hub
        self.user = user

    # identity (the spec's ``UserIdentity``) -----------------------------------------------
    @property
    def id(self) -> str:
        return self.user.id

    @property
    def user_id(self) -> str:
        return self.user.id

    @property
    def userId(self) -> str:
        return self.user.id

    @property
    def name(self) -> str:
        return self.user.name

    @property
    def email(self) -> str | None:
        return self.user.email

    @property
    def is_admin(self) -> bool:
        return self.user.is_admin

    @property
    def isAdmin(self) -> bool:
        return self.user.is_admin

    def identity(self) -> dict[str, Any]:
        """The wire shape of the user: ``{id, name, email, isAdmin}``."""
        return {"id": self.user.id, "name": self.user.name, "email": self.user.email, "isAdmin": self.user.is_admin}

    # values ------------------------------------------------------------------------------
    async def get_value(self, key: str, default: Any = None) -> Any:
        value = await self.hub.runtime.store.get_user_value(self.user.id, key)
        return default if value is None else value

    async def set_value(self, key: str, value: Any) -> None:
        """Store a value (JSON); live clients get ``user_value_changed`` and the hooks run."""
        await self.hub.set_value(self.user, key, value)

    async def delete_value(self, key: str) -> bool:
        """Remove a value; False when there was none (then nothing is announced)."""
        return await self.hub.delete_value(self.user, key)

    async def list_values(self, **options: Unpack[ListUserValuesOptions]) -> list[UserValueEntry]:
        """The user's values in key order: those whose key starts with ``prefix``, at most
        ``limit`` (1 to 1000) of them."""
        prefix = options.get("prefix") or ""
        limit = _limit(options, "limit", None, 1)
        values = await self.hub.runtime.store.list_user_values(self.user.id)
        entries = [UserValueEntry(k, v) for k, v in values.items() if k.startswith(prefix)]
        return entries if limit is None else entries[:limit]


class UserState(UserHandle):
    """What user endpoints and user hooks receive (the spec's ``UserState``): the user's
    identity and values, their threads, and their live event stream."""

    @property
    def clients(self) -> list[UserClient]:
        return list(self.hub.clients.get(self.user.id, ()))

    def emit(self, event: str, data: Any = None) -> None:
        """Send a custom event to every live client of this user."""
        self.hub.publish(self.user.id, event, data if isinstance(data, dict) else {"value": data})

    @contextlib.asynccontextmanager
    async def stream(self, transport: str = "endpoint") -> AsyncIterator[AsyncIterator[Event]]:
        """The user's live events while the block runs, as one more client of their stream
        (so the ``user_client_attached`` / ``user_client_detached`` hooks run)::

            async with user.stream() as events:
                async for event in events: ...
        """
        client = await self.hub.attach(self.user, transport)

        async def events() -> AsyncIterator[Event]:
            while True:
                event = await client.queue.get()
                if event is END:
                    return
                yield event

        try:
            yield events()
        finally:
            await self.hub.detach(self.user, client)

    async def list_threads(self, **options: Unpack[ListUserThreadsOptions]) -> list[UserThreadSummary]:
        """The user's threads, newest first, as summaries (see :class:`ListUserThreadsOptions`;
        ``limit`` 1 to 1000, default 50)."""
        limit = _limit(options, "limit", 50, 1) or 50
        offset = _limit(options, "offset", 0, 0) or 0
        wanted = options.get("metadata") or {}
        if not isinstance(wanted, Mapping):
            raise ValueError(f"metadata: an object of keys and values to match (got {type(wanted).__name__})")
        agent = options.get("agent") or None
        top_level = options.get("top_level", True)
        store = self.hub.runtime.store
        if not wanted:
            threads = await store.list_threads(agent=agent, user_id=self.user.id, top_level=top_level,
                                               limit=limit, offset=offset)
        else:
            # the store cannot filter by metadata: read pages until the window is filled
            threads, skipped, page = [], 0, 0
            while len(threads) < limit:
                batch = await store.list_threads(agent=agent, user_id=self.user.id, top_level=top_level,
                                                 limit=200, offset=page * 200)
                for thread in batch:
                    if all(k in thread.metadata and thread.metadata[k] == v for k, v in wanted.items()):
                        if skipped < offset:
                            skipped += 1
                        elif len(threads) < limit:
                            threads.append(thread)
                if len(batch) < 200:
                    break
                page += 1
        running = await self.hub.runtime.running_threads([t.id for t in threads])
        counts = [await store.count_messages(t.id, include_silent=False) for t in threads]
        return [UserThreadSummary(t.id, t.agent, t.title, t.created_at, t.updated_at, n, t.id in running,
                                  dict(t.metadata)) for t, n in zip(threads, counts, strict=True)]


class UserHub:
    """Every live user client of this process, and the user hooks."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.clients: dict[str, set[UserClient]] = {}
        #: where the user events are kept for clients that reconnect (set by the server)
        self.event_log: EventLog | None = None

    async def _run_hooks(self, name: str, *args: Any) -> None:
        registry = self.runtime.registry
        for entry in registry.all_entries("hooks"):
            try:
                definition = await registry.aget("hooks", entry.name, entry.package)
            except Exception:
                log.exception("loading hook %s failed", entry.name)
                continue
            if getattr(definition, "hook", None) != name:
                continue
            try:
                await definition.call(*args)
            except Exception:
                log.exception("hook %s (%s) failed", entry.name, name)

    async def attach(self, user: UserRecord, transport: str, user_agent: str | None = None) -> UserClient:
        client = UserClient(user.id, transport, user_agent=user_agent)
        self.clients.setdefault(user.id, set()).add(client)
        await self._run_hooks("user_client_attached", UserState(self, user), client)
        return client

    async def detach(self, user: UserRecord, client: UserClient) -> None:
        clients = self.clients.get(user.id)
        if clients is not None:
            clients.discard(client)
            if not clients:
                del self.clients[user.id]
        await self._run_hooks("user_client_detached", UserState(self, user), client)

    def publish(self, user_id: str, event: str, data: dict[str, Any]) -> None:
        item = Event(event, "", data)
        if self.event_log is not None:
            self.event_log.record(user_stream_key(user_id), item)
        for client in tuple(self.clients.get(user_id, ())):
            client.push(item)

    async def set_value(self, user: UserRecord, key: str, value: Any) -> None:
        await self.runtime.store.set_user_value(user.id, key, value)
        self.publish(user.id, "user_value_changed", {"key": key, "value": value})
        await self._run_hooks("user_value_changed", UserState(self, user), key)

    async def delete_value(self, user: UserRecord, key: str) -> bool:
        removed = await self.runtime.store.delete_user_value(user.id, key)
        if removed:
            self.publish(user.id, "user_value_changed", {"key": key, "value": None, "deleted": True})
            await self._run_hooks("user_value_changed", UserState(self, user), key)
        return removed


# routes: the caller's credential grants ------------------------------------------------------
_GRANT_FIELDS = {"name", "secret", "tools", "scopes", "expiresAt", "expiresIn", "description"}


async def list_grants(request: Request) -> Response:
    """``GET {prefix}/users/me/grants``: the caller's grants (never the secrets)."""
    caller = await authenticate(request)
    grants = await list_credential_grants(server_of(request).runtime.store, caller.id)
    return JSONResponse({"grants": [g.to_dict() for g in grants]})


async def create_grant(request: Request) -> Response:
    """``POST {prefix}/users/me/grants``: grant a secret to tools (a grant of the same name
    is replaced); 201 with the grant, without the secret."""
    caller = await authenticate(request)
    body = await read_json(request)
    unknown = sorted(set(body) - _GRANT_FIELDS)
    if unknown:
        raise ApiError(422, f"unknown field {unknown[0]!r} (a grant takes {', '.join(sorted(_GRANT_FIELDS))})")
    for required in ("name", "secret", "tools"):
        if required not in body:
            raise ApiError(422, f"{required}: required")
    rt = server_of(request).runtime
    try:
        grant = await grant_credential(rt.store, rt.registry, caller.id, body["name"], body["secret"],
                                       tools=body["tools"], scopes=body.get("scopes") or (),
                                       expires_at=body.get("expiresAt"), expires_in=body.get("expiresIn"),
                                       description=body.get("description"))
    except CredentialError as exc:
        raise ApiError(422, str(exc)) from None
    return JSONResponse(grant.to_dict(), status_code=201)


async def get_grant(request: Request) -> Response:
    caller = await authenticate(request)
    name = request.path_params["name"]
    grant = await get_credential_grant(server_of(request).runtime.store, caller.id, name)
    if grant is None:
        raise ApiError(404, f"you have no credential grant {name!r}")
    return JSONResponse(grant.to_dict())


async def revoke_grant(request: Request) -> Response:
    """``DELETE {prefix}/users/me/grants/{name}``: revoke it; the record stays, as ``revoked``."""
    caller = await authenticate(request)
    name = request.path_params["name"]
    grant = await revoke_credential_grant(server_of(request).runtime.store, caller.id, name)
    if grant is None:
        raise ApiError(404, f"you have no credential grant {name!r}")
    return JSONResponse(grant.to_dict())


def user_routes(prefix: str) -> list[BaseRoute]:
    """The user routes this module answers (mounted beside the built-in ``/users/me`` ones)."""
    me = f"{prefix}/users/me"
    return [
        Route(f"{me}/grants", list_grants, methods=["GET"]),
        Route(f"{me}/grants", create_grant, methods=["POST"]),
        Route(f"{me}/grants/{{name}}", get_grant, methods=["GET"]),
        Route(f"{me}/grants/{{name}}", revoke_grant, methods=["DELETE"]),
    ]
