"""The server's shared state, kept on ``app.state.server`` so every route reaches the runtime."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from ..store.base import UserRecord

if TYPE_CHECKING:
    from ..engine.runtime import Runtime
    from ..eventlog import EventLog
    from ..events import Subscription
    from .endpoints import EndpointTable
    from .users import UserHub

__all__ = ["ServerState", "server_of"]


@dataclass
class ServerState:
    """What routes share: the runtime, the mount prefix, dev mode and the live user hub."""

    runtime: Runtime
    prefix: str
    dev: bool
    max_body: int
    hub: UserHub
    endpoints: EndpointTable
    local_user: UserRecord | None = None
    stream_buffer: int = 1000
    #: set when a shutdown was asked for: ``/readyz`` answers 503 from then on
    draining: bool = False
    #: recent events kept for clients that reconnect (None: turned off, or not started yet)
    event_log: EventLog | None = None
    #: the live thread streams (SSE, WebSocket), ended when the server shuts down
    streams: weakref.WeakSet[Subscription] = field(default_factory=weakref.WeakSet)

    def end_streams(self) -> None:
        """End every live stream (thread and user streams), so their clients reconnect to a
        worker that stays; the server can then finish its shutdown."""
        for sub in list(self.streams):
            sub.end()
        for clients in list(self.hub.clients.values()):
            for client in list(clients):
                client.end()
    extra: dict[str, Any] = field(default_factory=dict)


def server_of(conn: HTTPConnection) -> ServerState:
    state: ServerState = conn.app.state.server
    return state
