"""A started turn as one object: its execution id from the start, its status, cancelling it
(and only it), and its result.

:meth:`Runtime.submit` returns one. The execution, not the thread, is what it controls: a
thread may hold a running turn and several queued behind it, each with its own handle, and
cancelling one never touches another (see :meth:`Runtime.cancel`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Literal

from .options import StartOptions

if TYPE_CHECKING:
    from .ports import TurnHost
    from .results import ExecutionResult

__all__ = ["StartOptions", "Turn", "TurnStatus"]

#: where a turn is: waiting in its thread's inbox, running (or paused for an approval or
#: client results: ``waiting``), or ended with the record's status
TurnStatus = Literal["queued", "running", "waiting", "complete", "interrupted", "error", "cancelled"]


class Turn:
    """One execution started by :meth:`Runtime.submit`. ``await turn`` (or
    :meth:`result`) gives its :class:`ExecutionResult`."""

    __slots__ = ("_rt", "id", "task", "thread_id")

    def __init__(self, rt: TurnHost, thread_id: str, execution_id: str, task: asyncio.Task[ExecutionResult]) -> None:
        self._rt = rt
        #: the execution's id: the ``executionId`` of its events and its record
        self.id = execution_id
        self.thread_id = thread_id
        #: the task running it in this process
        self.task = task

    def __repr__(self) -> str:
        return f"Turn(id={self.id!r}, thread_id={self.thread_id!r}, done={self.task.done()})"

    def __await__(self) -> Generator[Any, None, ExecutionResult]:
        return self.task.__await__()

    def done(self) -> bool:
        """Whether its task here has ended (its result is ready)."""
        return self.task.done()

    async def result(self) -> ExecutionResult:
        """Wait for its end; its :class:`ExecutionResult`."""
        return await self.task

    async def status(self) -> TurnStatus:
        """Where it is now, as the store says (``queued`` until its record exists)."""
        record = await self._rt.store.get_execution(self.id)
        if record is None:
            return "queued"
        return record.status  # type: ignore[return-value]

    async def cancel(self, *, timeout: float = 10.0) -> bool:  # noqa: ASYNC109 - a bounded wait
        """Cancel this execution only (queued, running here or on another worker, or
        waiting); True when it was cancelled, False when it had already ended."""
        return await self._rt.cancel(self.id, timeout=timeout)
