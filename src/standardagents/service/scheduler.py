"""The scheduler: runs each schedule's ticks, exactly once across all workers.

Every worker polls the store for due schedules. A tick is claimed with a compare-and-set of
the schedule's ``next_run`` (from the tick to the one after it) in the same transaction as
the insert of its ``(schedule, tick)`` run row, so of several workers exactly one runs it,
and a restarted worker goes on from what the store says. Ticks that passed while no worker
ran (longer ago than :data:`GRACE_MS`) are run once (``missed="once"``) or skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from croniter import croniter

from ..definitions.schedule import ScheduleDefinition, check_timing
from ..exceptions import DefinitionError
from ..records import new_id, now_ms
from ..store import serviceops as ops
from ..store.serviceops import ScheduleRecord, run_op

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = ["GRACE_MS", "Scheduler", "create_schedule", "next_after", "sync_defined"]

log = logging.getLogger("standardagents.schedules")

#: a tick found due later than this after its time counts as missed (the worker was down)
GRACE_MS = 5_000
OVERLAPS = ("skip", "queue", "cancel")
#: seconds between looks at the previous run, for a run queued behind it in another thread
QUEUE_POLL = 0.2
MISSED = ("once", "skip")


def next_after(cron: str | None, interval_s: int | None, timezone: str, after_ms: int, anchor_ms: int) -> int:
    """The first tick strictly after ``after_ms``: the cron expression's next time in
    ``timezone``, or the next multiple of the interval counted from ``anchor_ms``."""
    if cron is not None:
        start = datetime.fromtimestamp(after_ms / 1000, tz=ZoneInfo(timezone))
        nxt: datetime = croniter(cron, start).get_next(datetime)
        return int(nxt.timestamp() * 1000)
    assert interval_s is not None
    step = interval_s * 1000
    if after_ms < anchor_ms:
        return anchor_ms
    return anchor_ms + ((after_ms - anchor_ms) // step + 1) * step


def _first_tick(cron: str | None, interval_s: int | None, timezone: str, now: int) -> int:
    if cron is not None:
        return next_after(cron, None, timezone, now, now)
    assert interval_s is not None
    # interval ticks fall on whole multiples of the interval (every second: on the second)
    step = interval_s * 1000
    return (now // step + 1) * step


async def create_schedule(rt: Runtime, *, agent: str, message: str, cron: str | None = None,
                          interval: int | None = None, timezone: str = "UTC", thread_id: str | None = None,
                          overlap: str = "skip", missed: str = "once", user_id: str | None = None,
                          paused: bool = False) -> ScheduleRecord:
    """Store a schedule made at run time (checked first: a :class:`DefinitionError` names the field)."""
    if not rt.registry.has("agents", agent):
        raise DefinitionError(f"field 'agent': unknown agent {agent!r}; known: {', '.join(rt.registry.names('agents'))}")
    if not isinstance(message, str) or not message.strip():
        raise DefinitionError("field 'message' must be a non-empty string")
    problem = check_timing(cron, interval, timezone)
    if problem:
        raise DefinitionError(problem)
    if overlap not in OVERLAPS:
        raise DefinitionError(f"field 'overlap' must be one of {', '.join(OVERLAPS)} (got {overlap!r})")
    if missed not in MISSED:
        raise DefinitionError(f"field 'missed' must be one of {', '.join(MISSED)} (got {missed!r})")
    now = now_ms()
    record = ScheduleRecord(id=new_id("sch_"), name=None, agent=agent, cron=cron, interval_s=interval,
                            timezone=timezone, message=message, thread_id=thread_id, overlap=overlap, missed=missed,
                            paused=paused, next_run=_first_tick(cron, interval, timezone, now), last_run=None,
                            last_execution_id=None, user_id=user_id, source="api", created_at=now, updated_at=now)
    await run_op(rt.store, ops.insert_schedule, record)
    return record


async def sync_defined(rt: Runtime) -> None:
    """Store the project's ``define_schedule`` definitions (by name; a run's state stays)."""
    now = now_ms()
    for name in rt.registry.names("schedules"):
        d: ScheduleDefinition = rt.registry.get("schedules", name)
        record = ScheduleRecord(id=f"sch_{name}", name=name, agent=d.agent, cron=d.cron, interval_s=d.interval,
                                timezone=d.timezone, message=d.message if isinstance(d.message, str) else "",
                                thread_id=None, overlap=d.overlap, missed=d.missed, paused=d.paused,
                                next_run=_first_tick(d.cron, d.interval, d.timezone, now), last_run=None,
                                last_execution_id=None, user_id=None, source="project", created_at=now, updated_at=now)
        await run_op(rt.store, ops.upsert_defined_schedule, record)


class Scheduler:
    """One worker's part of running schedules: poll, claim ticks, start their turns."""

    def __init__(self, rt: Runtime, *, poll: float = 0.25) -> None:
        self.rt = rt
        self.poll = poll
        self.worker = f"{rt.owner}:{os.getpid()}"
        self._task: asyncio.Task[None] | None = None
        self._turns: set[asyncio.Task[Any]] = set()
        self._wake = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="scheduler")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        try:
            await sync_defined(self.rt)
        except Exception:
            log.warning("could not store the project's schedules", exc_info=True)
        while True:
            try:
                await self.run_due()
                nxt = await run_op(self.rt.store, ops.next_due, write=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("scheduler: the store could not be read", exc_info=True)
                nxt = None
            wait = self.poll if nxt is None else min(self.poll, max(0.0, (nxt - now_ms()) / 1000))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def run_due(self) -> int:
        """Claim and start every tick due now; returns how many this worker claimed."""
        if self.rt.draining:
            return 0
        now = now_ms()
        claimed = 0
        for schedule in await run_op(self.rt.store, ops.due_schedules, now, 50, write=False):
            tick = schedule.next_run
            following = next_after(schedule.cron, schedule.interval_s, schedule.timezone, max(now, tick), 0)
            run_tick: int | None = tick
            if now - tick > GRACE_MS:
                # ticks were missed while no worker ran: the newest one stands for them all
                latest = tick
                while True:
                    step = next_after(schedule.cron, schedule.interval_s, schedule.timezone, latest, 0)
                    if step > now:
                        break
                    latest = step
                run_tick = latest if schedule.missed == "once" else None
            if not await run_op(self.rt.store, ops.claim_tick, schedule.id, tick, run_tick, following,
                                self.worker, now):
                continue
            if run_tick is None:
                log.info("schedule %s: ticks missed since %s skipped", schedule.id, tick)
                continue
            claimed += 1
            task = asyncio.get_running_loop().create_task(self._run_tick(schedule, run_tick))
            self._turns.add(task)
            task.add_done_callback(self._turns.discard)
        return claimed

    async def _message(self, schedule: ScheduleRecord) -> str:
        if schedule.name is not None and self.rt.registry.has("schedules", schedule.name):
            definition: ScheduleDefinition = self.rt.registry.get("schedules", schedule.name)
            if callable(definition.message):
                value = definition.message()
                if inspect.isawaitable(value):
                    value = await value
                return str(value)
        return schedule.message

    async def _run_tick(self, schedule: ScheduleRecord, tick: int) -> None:
        rt = self.rt
        thread_id = schedule.thread_id
        try:
            previous = schedule.last_execution_id
            busy: Any = None
            if previous is not None and await _still_running(rt, previous):
                if schedule.overlap == "skip":
                    await run_op(rt.store, ops.finish_tick, schedule.id, tick, "skipped", thread_id, None,
                                 f"execution {previous} was still running")
                    return
                if schedule.overlap == "cancel":
                    await rt.cancel(previous)
                elif thread_id is None:
                    # queue, with a new thread each run: this run starts once the previous ended
                    while await _still_running(rt, previous):  # noqa: ASYNC110 - it may run on another worker
                        await asyncio.sleep(QUEUE_POLL)
                busy = "enqueue"
            message = await self._message(schedule)
            if thread_id is None or not await rt.store.get_thread(thread_id):
                thread = await rt.create_thread(schedule.agent, user_id=schedule.user_id,
                                                metadata={"schedule": schedule.id, "tick": tick})
                if schedule.name is not None and self._same_thread(schedule):
                    await run_op(rt.store, ops.set_schedule_thread, schedule.id, thread.id)
                thread_id = thread.id
            execution_id = new_id("exe_")
            await rt.start(thread_id, message, execution_id=execution_id, busy=busy,
                           metadata={"schedule": schedule.id, "tick": tick})
            await run_op(rt.store, ops.finish_tick, schedule.id, tick, "started", thread_id, execution_id, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("schedule %s: the run of tick %s failed: %s", schedule.id, tick, error)
            with contextlib.suppress(Exception):
                await run_op(rt.store, ops.finish_tick, schedule.id, tick, "failed", thread_id, None, error)
            from .webhooks import enqueue

            with contextlib.suppress(Exception):
                await enqueue(rt, "schedule.failed", f"{schedule.id}:{tick}",
                              {"scheduleId": schedule.id, "tick": tick, "error": error}, thread_id)

    def _same_thread(self, schedule: ScheduleRecord) -> bool:
        definition = self.rt.registry.get("schedules", schedule.name) if schedule.name else None
        return bool(definition is not None and definition.same_thread)


async def _still_running(rt: Runtime, execution_id: str) -> bool:
    record = await rt.store.get_execution(execution_id)
    if record is None:
        # not stored yet: started a moment ago, or queued behind another turn
        return await rt.execution_thread(execution_id) is not None
    return record.status in ("running", "waiting")


def tick_time(ms: int) -> str:
    """A tick as an ISO time (UTC), for people reading a run list."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")

