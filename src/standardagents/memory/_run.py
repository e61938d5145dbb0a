"""Running memory's SQL on the runtime's store: one transaction per call, on the store's own
connection (SQLite) or pool (PostgreSQL), so memory writes take part in the store's locking."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


async def run(store: Any, fn: Callable[..., T], *args: Any, write: bool = True) -> T:
    """``fn(connection, *args)`` as one transaction of ``store`` (a :class:`SQLStore`)."""
    result: T = await store._run(fn, *args, write=write)  # the SQL store's one-transaction runner
    return result
