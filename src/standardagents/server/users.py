"""Live user connections and per-user values, with the spec's user hooks.

A user may hold several live clients (tabs, devices). Attaching or detaching one runs every
registered ``user_client_attached`` / ``user_client_detached`` hook; changing a value runs
``user_value_changed``. A failing hook is logged and never breaks the connection.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..eventlog import EventLog, user_stream_key
from ..events import END, Event
from ..records import new_id, now_ms
from ..store.base import UserRecord

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = ["UserClient", "UserHub", "UserState"]

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


class UserState:
    """What user hooks receive: the user, their values and their live clients."""

    def __init__(self, hub: UserHub, user: UserRecord) -> None:
        self.hub = hub
        self.user = user

    @property
    def user_id(self) -> str:
        return self.user.id

    @property
    def userId(self) -> str:
        return self.user.id

    @property
    def clients(self) -> list[UserClient]:
        return list(self.hub.clients.get(self.user.id, ()))

    async def get_value(self, key: str, default: Any = None) -> Any:
        value = await self.hub.runtime.store.get_user_value(self.user.id, key)
        return default if value is None else value

    async def set_value(self, key: str, value: Any) -> None:
        await self.hub.set_value(self.user, key, value)

    async def delete_value(self, key: str) -> bool:
        return await self.hub.delete_value(self.user, key)

    async def list_values(self) -> dict[str, Any]:
        return await self.hub.runtime.store.list_user_values(self.user.id)

    def emit(self, event: str, data: Any = None) -> None:
        """Send a custom event to every live client of this user."""
        self.hub.publish(self.user.id, event, data if isinstance(data, dict) else {"value": data})


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
