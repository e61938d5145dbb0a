"""What a part of the engine needs of the runtime or of an execution, as small Protocols.

The ``Runtime`` facade sits on top of the engine's layers and its parts sit under it; a part
that holds the runtime names here only what it uses of it, so that the layers hold for
annotations too and a reader sees the part's real dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = ["TurnHost"]


class TurnHost(Protocol):
    """What a :class:`~.handle.Turn` asks of the runtime that started it."""

    @property
    def store(self) -> Store: ...

    async def cancel(self, execution_id: str, *, timeout: float = 10.0) -> bool: ...  # noqa: ASYNC109 - a bounded wait
