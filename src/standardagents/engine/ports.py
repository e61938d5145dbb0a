"""What a part of the engine needs of the runtime or of an execution, as small Protocols.

The ``Runtime`` facade sits on top of the engine's layers and its parts sit under it; a part
that holds the runtime names here only what it uses of it, so that the layers hold for
annotations too and a reader sees the part's real dependency.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..events import EventBus
    from ..records import ExecutionRecord
    from ..store.base import Store

__all__ = ["DoneHost", "OwnerHost", "StoreHost", "TurnHost"]


class StoreHost(Protocol):
    """What a part that only reads and writes the store asks of the runtime."""

    @property
    def store(self) -> Store: ...


class TurnHost(Protocol):
    """What a :class:`~.handle.Turn` asks of the runtime that started it."""

    @property
    def store(self) -> Store: ...

    async def cancel(self, execution_id: str, *, timeout: float = 10.0) -> bool: ...  # noqa: ASYNC109 - a bounded wait


class OwnerHost(Protocol):
    """What telling a live owner from a gone one asks of the runtime: its own owner id."""

    @property
    def owner(self) -> str: ...


class DoneHost(Protocol):
    """What ending a turn (its one ``done``) asks of the runtime: the bus it is published on,
    the store its durable copy goes to, and the hooks run once it is out."""

    @property
    def bus(self) -> EventBus: ...

    @property
    def store(self) -> Store: ...

    @property
    def turn_end_hooks(self) -> list[Callable[[ExecutionRecord, dict[str, Any]], Awaitable[None]]]: ...
