"""The executions a runtime holds in this process: the tasks it started, the turn each thread
runs, the threads it claimed in the store, the messages waiting for a busy thread, the turns
of gone processes it is resuming, and the in-process lock of each thread.

One object owns this bookkeeping so that starting, stopping, resuming and handing over turns
change it through named methods, and the heartbeat reads it in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

from ..records import Fence

if TYPE_CHECKING:
    from .execution_core import ExecutionCore
    from .results import ExecutionResult

__all__ = ["InFlight"]


class InFlight:
    """What runs, waits and is held here, by thread and by execution id."""

    def __init__(self) -> None:
        #: every execution task started here (running or waiting for its thread)
        self.tasks: set[asyncio.Task[ExecutionResult]] = set()
        #: how many of those tasks each thread has (a message to a thread with any waits)
        self.pending: dict[str, int] = {}
        #: the task running each thread's execution, and that execution
        self.running: dict[str, asyncio.Task[ExecutionResult]] = {}
        self.executions: dict[str, ExecutionCore] = {}
        #: threads this process holds across processes (a claim in the store)
        self.claimed: set[str] = set()
        #: executions whose message waits in a busy thread's inbox, by id (cancellable)
        self.queued_tasks: dict[str, asyncio.Task[ExecutionResult]] = {}
        #: tools queued on an idle thread, run first by the execution with that id
        self.queued_first: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        #: executions of gone processes claimed here and about to be resumed (id: epoch)
        self.resuming: dict[str, int] = {}
        #: executions stopped unsettled when the database could not be reached; taken up
        #: again (as a gone process's would be) once the database answers
        self.abandoned: set[str] = set()
        #: executions to roll back when they end (a message with busy="rollback" stopped them)
        self.roll_back: set[str] = set()
        #: set while handing over: cancelled executions end without settling (another
        #: process resumes them)
        self.handing_over = False
        #: the heartbeat keeping this process's executions and claims fresh in the store
        self.heartbeat: asyncio.Task[None] | None = None
        #: when (event-loop clock) the store last confirmed that no execution held here was
        #: taken over (a heartbeat that found none lost)
        self.owned_at = 0.0
        #: side tasks (titles, admission releases, recovery looks), cancelled on close
        self.background: set[asyncio.Task[Any]] = set()
        #: each thread's in-process lock, kept only while an execution holds or waits for it
        self.locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}

    @contextlib.asynccontextmanager
    async def lock(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's in-process lock. The lock lives only while an execution holds or
        waits for it, so a long-lived process keeps no lock per thread it ever ran."""
        lock = self.locks.get(thread_id)
        if lock is None:
            lock = self.locks[thread_id] = asyncio.Lock()
        self._lock_users[thread_id] = self._lock_users.get(thread_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            left = self._lock_users.pop(thread_id) - 1
            if left:
                self._lock_users[thread_id] = left
            else:
                self.locks.pop(thread_id, None)

    def track(self, coro: Coroutine[Any, Any, ExecutionResult], thread_id: str) -> asyncio.Task[ExecutionResult]:
        """Run an execution task, counted as pending on its thread until it ends."""
        task: asyncio.Task[ExecutionResult] = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        self.pending[thread_id] = self.pending.get(thread_id, 0) + 1

        def finished(t: asyncio.Task[ExecutionResult]) -> None:
            self.tasks.discard(t)
            left = self.pending.get(thread_id, 1) - 1
            if left > 0:
                self.pending[thread_id] = left
            else:
                self.pending.pop(thread_id, None)

        task.add_done_callback(finished)
        return task

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a side task, kept (and cancelled on close) until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def queue(self, execution_id: str, task: asyncio.Task[ExecutionResult]) -> None:
        """Note the task of an execution whose message waits for its thread (cancellable by id)."""
        self.queued_tasks[execution_id] = task

        def forget(_task: asyncio.Task[ExecutionResult]) -> None:
            self.queued_tasks.pop(execution_id, None)

        task.add_done_callback(forget)

    def begin(self, thread_id: str, task: asyncio.Task[ExecutionResult], execution: ExecutionCore) -> None:
        """Note that ``task`` runs ``execution`` as its thread's turn."""
        self.running[thread_id] = task
        self.executions[thread_id] = execution

    def end(self, thread_id: str) -> None:
        """The thread's turn is over here."""
        self.running.pop(thread_id, None)
        self.executions.pop(thread_id, None)

    def running_task(self, execution_id: str) -> asyncio.Task[ExecutionResult] | None:
        """The task running execution ``execution_id`` here (None: not here)."""
        for thread_id, execution in self.executions.items():
            if execution.record.id == execution_id:
                return self.running.get(thread_id)
        return None

    def execution_ids(self) -> set[str]:
        """The ids of the executions running here."""
        return {e.record.id for e in self.executions.values()}

    def live_tasks(self) -> set[asyncio.Task[ExecutionResult]]:
        """The execution tasks that have not ended (started, queued or running)."""
        return {t for t in (*self.tasks, *self.running.values()) if not t.done()}

    def held(self) -> list[Fence]:
        """The executions this process holds, at their epochs: those running and those it
        claimed to resume (what a heartbeat refreshes)."""
        fences = [Fence(e.record.id, e.record.epoch) for e in self.executions.values()]
        fences += [Fence(i, epoch) for i, epoch in self.resuming.items()]
        return fences

    def drop_lost(self, execution_id: str) -> None:
        """Stop the local run of an execution another process took over, unsettled."""
        for thread_id, execution in list(self.executions.items()):
            if execution.record.id == execution_id:
                execution.taken_over = True
                task = self.running.get(thread_id)
                if task is not None:
                    task.cancel()
        self.resuming.pop(execution_id, None)

    def mark_rollback(self, thread_id: str) -> None:
        """Roll back the thread's running execution when it ends (it was stopped for that)."""
        execution = self.executions.get(thread_id)
        if execution is not None:
            self.roll_back.add(execution.record.id)
