"""SQL operations of the service layer (schedules, webhooks, quotas, rate limits).

Each function takes a connection inside one transaction (run by :func:`run_op`); claims are
single conditional statements, so workers sharing the database never take the same tick,
outbox row, quota slot or window share twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from sqlalchemy import Connection, and_, bindparam, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from .base import Store
from .schema import messages, threads
from .schema_service import (
    quota_slots,
    rate_blocks,
    rate_windows,
    schedule_runs,
    schedules,
    webhook_attempts,
    webhook_outbox,
    webhooks,
)

__all__ = [
    "DeliveryAttempt",
    "OutboxRecord",
    "ScheduleRecord",
    "ScheduleRun",
    "WebhookRecord",
    "run_op",
]

T = TypeVar("T")


async def run_op(store: Store, fn: Callable[..., T], *args: Any, write: bool = True) -> T:
    """Run ``fn(conn, *args)`` as one transaction of ``store`` (an SQL store: the only kind)."""
    runner = getattr(store, "_run", None)
    if runner is None:
        raise TypeError(f"{type(store).__name__} does not run SQL operations")
    result: T = await runner(fn, *args, write=write)
    return result


def _insert_ignore(conn: Connection, table: Any, keys: list[str], values: dict[str, Any]) -> bool:
    mod = pg_dialect if conn.dialect.name == "postgresql" else sqlite_dialect
    stmt = mod.insert(table).values(**values).on_conflict_do_nothing(index_elements=[table.c[k] for k in keys])
    return bool(conn.execute(stmt).rowcount)


# ---------------------------------------------------------------- schedules

@dataclass(slots=True)
class ScheduleRecord:
    """A stored schedule: what to run, when next, and what to do on overlap and missed ticks."""

    id: str
    name: str | None
    agent: str
    cron: str | None
    interval_s: int | None
    timezone: str
    message: str
    thread_id: str | None
    overlap: str
    missed: str
    paused: bool
    next_run: int
    last_run: int | None
    last_execution_id: str | None
    user_id: str | None
    source: str
    created_at: int
    updated_at: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "agent": self.agent, "cron": self.cron,
                "interval": self.interval_s, "timezone": self.timezone, "message": self.message,
                "thread": self.thread_id, "overlap": self.overlap, "missed": self.missed, "paused": self.paused,
                "nextRun": self.next_run, "lastRun": self.last_run, "lastExecutionId": self.last_execution_id,
                "userId": self.user_id, "source": self.source, "createdAt": self.created_at,
                "updatedAt": self.updated_at}


_SCHEDULE_COLS = [f.name for f in fields(ScheduleRecord)]


def _schedule(row: Any) -> ScheduleRecord:
    return ScheduleRecord(**{k: row._mapping[k] for k in _SCHEDULE_COLS})


@dataclass(slots=True)
class ScheduleRun:
    schedule_id: str
    tick: int
    worker: str
    status: str
    thread_id: str | None
    execution_id: str | None
    error: str | None
    created_at: int

    def to_dict(self) -> dict[str, Any]:
        return {"scheduleId": self.schedule_id, "tick": self.tick, "worker": self.worker, "status": self.status,
                "threadId": self.thread_id, "executionId": self.execution_id, "error": self.error,
                "createdAt": self.created_at}


def insert_schedule(conn: Connection, record: ScheduleRecord) -> None:
    conn.execute(schedules.insert().values(**{k: getattr(record, k) for k in _SCHEDULE_COLS}))


def upsert_defined_schedule(conn: Connection, record: ScheduleRecord) -> None:
    """A project's schedule by name: created once; its definition's fields follow the code, its
    state (next run, paused) stays as the store has it unless the timing changed."""
    current = conn.execute(select(schedules).where(schedules.c.name == record.name)).first()
    if current is None:
        _insert_ignore(conn, schedules, ["id"], {k: getattr(record, k) for k in _SCHEDULE_COLS})
        return
    old = _schedule(current)
    changes: dict[str, Any] = {k: getattr(record, k) for k in
                               ("agent", "cron", "interval_s", "timezone", "message", "overlap", "missed")}
    if (old.cron, old.interval_s, old.timezone) != (record.cron, record.interval_s, record.timezone):
        changes["next_run"] = record.next_run
    if any(getattr(old, k) != v for k, v in changes.items()):
        changes["updated_at"] = record.updated_at
        conn.execute(update(schedules).where(schedules.c.id == old.id).values(**changes))


def get_schedule(conn: Connection, schedule_id: str) -> ScheduleRecord | None:
    row = conn.execute(select(schedules).where(or_(schedules.c.id == schedule_id,
                                                   schedules.c.name == schedule_id))).first()
    return _schedule(row) if row is not None else None


def list_schedules(conn: Connection, user_id: str | None) -> list[ScheduleRecord]:
    stmt = select(schedules).order_by(schedules.c.created_at, schedules.c.id)
    if user_id is not None:
        stmt = stmt.where(schedules.c.user_id == user_id)
    return [_schedule(r) for r in conn.execute(stmt)]


def due_schedules(conn: Connection, now: int, limit: int) -> list[ScheduleRecord]:
    stmt = (select(schedules).where(schedules.c.paused.is_(False), schedules.c.next_run <= now)
            .order_by(schedules.c.next_run).limit(limit))
    return [_schedule(r) for r in conn.execute(stmt)]


def next_due(conn: Connection) -> int | None:
    value = conn.execute(select(func.min(schedules.c.next_run)).where(schedules.c.paused.is_(False))).scalar()
    return int(value) if value is not None else None


def claim_tick(conn: Connection, schedule_id: str, expected_next: int, tick: int | None, new_next: int,
               worker: str, now: int) -> bool:
    """Move the schedule's next run from ``expected_next`` to ``new_next`` and, when ``tick``
    is given, record its run as this worker's: True for the one worker whose compare-and-set
    succeeded (the run's unique (schedule, tick) row makes a second run impossible too)."""
    moved = conn.execute(update(schedules)
                         .where(schedules.c.id == schedule_id, schedules.c.next_run == expected_next,
                                schedules.c.paused.is_(False))
                         .values(next_run=new_next, updated_at=now,
                                 **({"last_run": tick} if tick is not None else {}))).rowcount
    if not moved:
        return False
    if tick is None:
        return True
    return _insert_ignore(conn, schedule_runs, ["schedule_id", "tick"],
                          {"schedule_id": schedule_id, "tick": tick, "worker": worker, "status": "claimed",
                           "thread_id": None, "execution_id": None, "error": None, "created_at": now})


def finish_tick(conn: Connection, schedule_id: str, tick: int, status: str, thread_id: str | None,
                execution_id: str | None, error: str | None) -> None:
    conn.execute(update(schedule_runs)
                 .where(schedule_runs.c.schedule_id == schedule_id, schedule_runs.c.tick == tick)
                 .values(status=status, thread_id=thread_id, execution_id=execution_id, error=error))
    if execution_id is not None:
        conn.execute(update(schedules).where(schedules.c.id == schedule_id).values(last_execution_id=execution_id))


def set_schedule_thread(conn: Connection, schedule_id: str, thread_id: str) -> None:
    conn.execute(update(schedules).where(schedules.c.id == schedule_id).values(thread_id=thread_id))


def list_runs(conn: Connection, schedule_id: str, limit: int) -> list[ScheduleRun]:
    stmt = (select(schedule_runs).where(schedule_runs.c.schedule_id == schedule_id)
            .order_by(schedule_runs.c.tick.desc()).limit(limit))
    return [ScheduleRun(**{f.name: r._mapping[f.name] for f in fields(ScheduleRun)}) for r in conn.execute(stmt)]


def set_paused(conn: Connection, schedule_id: str, paused: bool, next_run: int | None, now: int) -> bool:
    values: dict[str, Any] = {"paused": paused, "updated_at": now}
    if next_run is not None:
        values["next_run"] = next_run
    return bool(conn.execute(update(schedules).where(schedules.c.id == schedule_id).values(**values)).rowcount)


def delete_schedule(conn: Connection, schedule_id: str) -> bool:
    gone = conn.execute(delete(schedules).where(schedules.c.id == schedule_id)).rowcount
    conn.execute(delete(schedule_runs).where(schedule_runs.c.schedule_id == schedule_id))
    return bool(gone)


# ---------------------------------------------------------------- webhooks

@dataclass(slots=True)
class WebhookRecord:
    """A subscription: where to send which events (of one thread, or all), signed with ``secret``."""

    id: str
    name: str | None
    url: str
    events: list[str]
    secret: str
    thread_id: str | None
    user_id: str | None
    source: str
    created_at: int
    #: deliveries only for events of this execution (a subscription made with a message)
    execution_id: str | None = None
    #: ``webhook``, or ``a2a``: the push-notification config of the A2A task ``execution_id``
    kind: str = "webhook"
    #: an ``a2a`` subscription's config as the client set it (its id, url, token, authentication)
    config: dict[str, Any] | None = None

    def to_dict(self, *, secret: bool = False) -> dict[str, Any]:
        data = {"id": self.id, "name": self.name, "url": self.url, "events": list(self.events),
                "thread": self.thread_id, "execution": self.execution_id, "userId": self.user_id,
                "source": self.source, "createdAt": self.created_at}
        if secret:
            data["secret"] = self.secret
        return data


_WEBHOOK_COLS = [f.name for f in fields(WebhookRecord)]


def _webhook(row: Any) -> WebhookRecord:
    return WebhookRecord(**{k: row._mapping[k] for k in _WEBHOOK_COLS})


@dataclass(slots=True)
class OutboxRecord:
    """One event for one subscription: pending until a 2xx answer, then delivered."""

    id: str
    webhook_id: str
    event_type: str
    event_key: str
    payload: dict[str, Any]
    status: str
    attempts: int
    next_attempt_at: int
    claimed_by: str | None
    claimed_until: int | None
    last_error: str | None
    created_at: int
    delivered_at: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "webhookId": self.webhook_id, "type": self.event_type, "key": self.event_key,
                "payload": self.payload, "status": self.status, "attempts": self.attempts,
                "nextAttemptAt": self.next_attempt_at, "lastError": self.last_error, "createdAt": self.created_at,
                "deliveredAt": self.delivered_at}


_OUTBOX_COLS = [f.name for f in fields(OutboxRecord)]


def _outbox(row: Any) -> OutboxRecord:
    return OutboxRecord(**{k: row._mapping[k] for k in _OUTBOX_COLS})


@dataclass(slots=True)
class DeliveryAttempt:
    id: int
    outbox_id: str
    webhook_id: str
    attempt: int
    status_code: int | None
    error: str | None
    duration_ms: int
    created_at: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "messageId": self.outbox_id, "attempt": self.attempt, "statusCode": self.status_code,
                "error": self.error, "durationMs": self.duration_ms, "createdAt": self.created_at, **self.extra}


def insert_webhook(conn: Connection, record: WebhookRecord) -> None:
    conn.execute(webhooks.insert().values(**{k: getattr(record, k) for k in _WEBHOOK_COLS}))


def upsert_defined_webhook(conn: Connection, record: WebhookRecord) -> None:
    current = conn.execute(select(webhooks).where(webhooks.c.name == record.name)).first()
    if current is None:
        _insert_ignore(conn, webhooks, ["id"], {k: getattr(record, k) for k in _WEBHOOK_COLS})
        return
    conn.execute(update(webhooks).where(webhooks.c.name == record.name)
                 .values(url=record.url, events=record.events, secret=record.secret, thread_id=record.thread_id))


def get_webhook(conn: Connection, webhook_id: str) -> WebhookRecord | None:
    row = conn.execute(select(webhooks).where(webhooks.c.id == webhook_id)).first()
    return _webhook(row) if row is not None else None


def list_webhooks(conn: Connection, user_id: str | None) -> list[WebhookRecord]:
    stmt = select(webhooks).where(webhooks.c.kind == "webhook").order_by(webhooks.c.created_at, webhooks.c.id)
    if user_id is not None:
        stmt = stmt.where(webhooks.c.user_id == user_id)
    return [_webhook(r) for r in conn.execute(stmt)]


def delete_webhook(conn: Connection, webhook_id: str) -> bool:
    gone = conn.execute(delete(webhooks).where(webhooks.c.id == webhook_id)).rowcount
    conn.execute(delete(webhook_outbox).where(webhook_outbox.c.webhook_id == webhook_id,
                                              webhook_outbox.c.status == "pending"))
    return bool(gone)


#: the event an A2A push-notification config receives (and only it)
A2A_EVENT = "a2a.task"


#: the subscriptions of every execution, and those of ``execution_id`` (none when it is NULL);
#: built once, so asking costs the query and not the statement's construction
_SCOPED_WEBHOOKS = select(webhooks).where(or_(webhooks.c.execution_id.is_(None),
                                              webhooks.c.execution_id == bindparam("execution_id")))


def webhooks_wanting(conn: Connection, event_type: str, thread_id: str | None,
                     execution_id: str | None = None) -> list[WebhookRecord]:
    """The subscriptions that want the event: of its kind, naming it, and of its thread and
    execution when they are scoped to one."""
    wanting = []
    for hook in conn.execute(_SCOPED_WEBHOOKS, {"execution_id": execution_id}):
        record = _webhook(hook)
        if (record.kind == "a2a") != (event_type == A2A_EVENT):
            continue
        if event_type not in record.events and "*" not in record.events:
            continue
        if record.thread_id is not None and record.thread_id != thread_id:
            continue
        wanting.append(record)
    return wanting


def any_webhook_wanting(conn: Connection, event_type: str, thread_id: str | None,
                        execution_id: str | None = None) -> bool:
    """Whether any subscription wants the event (read only: most events have none, and
    asking costs a read where enqueueing costs a write transaction)."""
    return bool(webhooks_wanting(conn, event_type, thread_id, execution_id))


def enqueue_event(conn: Connection, event_type: str, event_key: str, payload: dict[str, Any],
                  thread_id: str | None, ids: Callable[[], str], now: int, execution_id: str | None = None) -> int:
    """One outbox row per subscription wanting the event (once per subscription and key,
    however many workers enqueue it). Returns how many rows were added."""
    added = 0
    for record in webhooks_wanting(conn, event_type, thread_id, execution_id):
        added += _insert_ignore(conn, webhook_outbox, ["webhook_id", "event_key"], {
            "id": ids(), "webhook_id": record.id, "event_type": event_type, "event_key": event_key,
            "payload": payload, "status": "pending", "attempts": 0, "next_attempt_at": now,
            "claimed_by": None, "claimed_until": None, "last_error": None, "created_at": now, "delivered_at": None})
    return added


def claim_deliveries(conn: Connection, now: int, worker: str, limit: int, lease_ms: int) -> list[OutboxRecord]:
    """Take up to ``limit`` due rows (or rows whose sender's lease lapsed) for ``worker``."""
    o = webhook_outbox.c
    due = and_(o.status == "pending", o.next_attempt_at <= now, or_(o.claimed_until.is_(None), o.claimed_until < now))
    candidates = select(o.id).where(due).order_by(o.next_attempt_at, o.id).limit(limit)
    if conn.dialect.name == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True)
    stmt = (update(webhook_outbox).where(o.id.in_(candidates.scalar_subquery()))
            .values(claimed_by=worker, claimed_until=now + lease_ms, attempts=o.attempts + 1)
            .returning(*[webhook_outbox.c[k] for k in _OUTBOX_COLS]))
    return sorted((_outbox(r) for r in conn.execute(stmt)), key=lambda r: (r.next_attempt_at, r.id))


def record_attempt(conn: Connection, outbox: OutboxRecord, worker: str, status_code: int | None,
                   error: str | None, duration_ms: int, delivered: bool, retry_at: int | None, now: int) -> bool:
    """Log an attempt and settle the row: delivered, retried at ``retry_at``, or failed for good
    (``retry_at`` None). False when the row was no longer this worker's."""
    o = webhook_outbox.c
    mine = and_(o.id == outbox.id, o.claimed_by == worker, o.status == "pending")
    if delivered:
        values: dict[str, Any] = {"status": "delivered", "delivered_at": now, "claimed_until": None, "last_error": None}
    elif retry_at is not None:
        values = {"next_attempt_at": retry_at, "claimed_until": None, "last_error": error}
    else:
        values = {"status": "failed", "claimed_until": None, "last_error": error}
    settled = conn.execute(update(webhook_outbox).where(mine).values(**values)).rowcount
    conn.execute(webhook_attempts.insert().values(outbox_id=outbox.id, webhook_id=outbox.webhook_id,
                                                  attempt=outbox.attempts, status_code=status_code, error=error,
                                                  duration_ms=duration_ms, created_at=now))
    return bool(settled)


def record_attempts(conn: Connection, worker: str, results: list[tuple[OutboxRecord, int | None, str | None, int,
                                                                  bool, int | None]], now: int) -> int:
    """:func:`record_attempt` for a batch, in one transaction; returns how many rows settled.
    A subscription made for one execution is removed once its ``execution.done`` was settled
    and nothing else of it waits."""
    settled = sum(record_attempt(conn, row, worker, status, error, duration_ms, delivered, retry_at, now)
                  for row, status, error, duration_ms, delivered, retry_at in results)
    hooks = {row.webhook_id for row, *_ in results}
    if hooks:
        for (webhook_id,) in conn.execute(select(webhooks.c.id).where(
                webhooks.c.id.in_(hooks), webhooks.c.execution_id.is_not(None), webhooks.c.kind == "webhook")):
            _end_run_subscription(conn, webhook_id)
    return settled


def _end_run_subscription(conn: Connection, webhook_id: str) -> None:
    o = webhook_outbox.c
    rows = conn.execute(select(o.event_type, o.status).where(o.webhook_id == webhook_id)).all()
    if any(r.status == "pending" for r in rows) or not any(r.event_type == "execution.done" for r in rows):
        return
    conn.execute(delete(webhooks).where(webhooks.c.id == webhook_id))
    conn.execute(delete(webhook_outbox).where(o.webhook_id == webhook_id))
    conn.execute(delete(webhook_attempts).where(webhook_attempts.c.webhook_id == webhook_id))


def list_outbox(conn: Connection, webhook_id: str, limit: int) -> list[OutboxRecord]:
    stmt = (select(webhook_outbox).where(webhook_outbox.c.webhook_id == webhook_id)
            .order_by(webhook_outbox.c.created_at.desc(), webhook_outbox.c.id).limit(limit))
    return [_outbox(r) for r in conn.execute(stmt)]


def list_attempts(conn: Connection, webhook_id: str, limit: int) -> list[DeliveryAttempt]:
    a = webhook_attempts.c
    stmt = select(webhook_attempts).where(a.webhook_id == webhook_id).order_by(a.id.desc()).limit(limit)
    return [DeliveryAttempt(**{f.name: r._mapping[f.name] for f in fields(DeliveryAttempt) if f.name != "extra"})
            for r in conn.execute(stmt)]


def replay(conn: Connection, webhook_id: str, outbox_id: str, now: int) -> bool:
    """Send a delivered or failed event again (same message id, so a receiver can tell)."""
    o = webhook_outbox.c
    return bool(conn.execute(update(webhook_outbox).where(o.id == outbox_id, o.webhook_id == webhook_id)
                             .values(status="pending", next_attempt_at=now, claimed_until=None,
                                     claimed_by=None, delivered_at=None)).rowcount)


def outbox_counts(conn: Connection) -> dict[str, int]:
    rows = conn.execute(select(webhook_outbox.c.status, func.count()).group_by(webhook_outbox.c.status))
    return {r[0]: int(r[1]) for r in rows}


# ---------------------------------------------------------------- quotas and rate limits

def take_slot(conn: Connection, key: str, limit: int, holder: str, until: int, now: int) -> bool:
    """Hold one of ``limit`` slots of ``key`` (free, or held past its lease): False when all are taken."""
    for slot in range(limit):
        _insert_ignore(conn, quota_slots, ["key", "slot"], {"key": key, "slot": slot, "holder": None, "until": None})
    q = quota_slots.c
    for slot in range(limit):
        taken = conn.execute(update(quota_slots)
                             .where(q.key == key, q.slot == slot, or_(q.holder.is_(None), q.until < now))
                             .values(holder=holder, until=until)).rowcount
        if taken:
            return True
    return False


def release_slot(conn: Connection, key: str, holder: str) -> None:
    conn.execute(update(quota_slots).where(quota_slots.c.key == key, quota_slots.c.holder == holder)
                 .values(holder=None, until=None))


def take_window(conn: Connection, key: str, window: int, requests: int, tokens: int,
                max_requests: int | None, max_tokens: int | None) -> bool:
    """Count ``requests`` and ``tokens`` in ``key``'s window when that keeps it within both
    limits (a window's first request is always let through its token limit)."""
    _insert_ignore(conn, rate_windows, ["key", "window"], {"key": key, "window": window, "requests": 0, "tokens": 0})
    w = rate_windows.c
    cond = [w.key == key, w.window == window]
    if max_requests is not None:
        cond.append(w.requests + requests <= max_requests)
    if max_tokens is not None:
        cond.append(or_(w.requests == 0, w.tokens + tokens <= max_tokens))
    return bool(conn.execute(update(rate_windows).where(*cond)
                             .values(requests=w.requests + requests, tokens=w.tokens + tokens)).rowcount)


def add_tokens(conn: Connection, key: str, window: int, tokens: int) -> None:
    w = rate_windows.c
    conn.execute(update(rate_windows).where(w.key == key, w.window == window).values(tokens=w.tokens + tokens))


def prune_windows(conn: Connection, before: int) -> None:
    conn.execute(delete(rate_windows).where(rate_windows.c.window < before))


def block(conn: Connection, key: str, until: int) -> None:
    mod = pg_dialect if conn.dialect.name == "postgresql" else sqlite_dialect
    stmt = mod.insert(rate_blocks).values(key=key, until=until)
    conn.execute(stmt.on_conflict_do_update(index_elements=[rate_blocks.c.key], set_={"until": until},
                                            where=rate_blocks.c.until < until))


def blocked_until(conn: Connection, key: str) -> int:
    value = conn.execute(select(rate_blocks.c.until).where(rate_blocks.c.key == key)).scalar()
    return int(value or 0)


def tenant_usage(conn: Connection, tenant: str, since: int) -> list[tuple[Any, Any]]:
    """``(usage, cost)`` of every model reply since ``since`` in the threads of ``tenant`` (the
    ``tenant`` their creator's identity stamped in their metadata), whoever of the tenant's
    users asked: what a tenant's daily token and cost quotas add up."""
    stmt = (select(messages.c.usage, messages.c.cost)
            .select_from(messages.join(threads, threads.c.id == messages.c.thread_id))
            .where(messages.c.role == "assistant", messages.c.usage.is_not(None), messages.c.created_at >= since,
                   threads.c.metadata["tenant"].as_string() == tenant))
    return [(r[0], r[1]) for r in conn.execute(stmt)]


# ---------------------------------------------------------------- A2A push-notification configs

def a2a_configs(conn: Connection, task_id: str, user_id: str | None) -> list[WebhookRecord]:
    """The push-notification configs of A2A task ``task_id`` (``user_id``'s, or everyone's)."""
    stmt = select(webhooks).where(webhooks.c.execution_id == task_id, webhooks.c.kind == "a2a")
    if user_id is not None:
        stmt = stmt.where(webhooks.c.user_id == user_id)
    return [_webhook(r) for r in conn.execute(stmt.order_by(webhooks.c.created_at, webhooks.c.id))]


def put_a2a_config(conn: Connection, record: WebhookRecord) -> None:
    """Store ``record`` in place of the caller's config of the same id for the same task."""
    config_id = (record.config or {}).get("id")
    for old in a2a_configs(conn, str(record.execution_id), record.user_id):
        if (old.config or {}).get("id") == config_id:
            conn.execute(delete(webhooks).where(webhooks.c.id == old.id))
    insert_webhook(conn, record)


def delete_a2a_configs(conn: Connection, task_id: str, user_id: str | None, config_id: str | None) -> int:
    """Remove the caller's configs of the task (the one with ``config_id``, or all); pending
    notifications of a removed config are dropped."""
    gone = 0
    for old in a2a_configs(conn, task_id, user_id):
        if config_id is None or (old.config or {}).get("id") == config_id:
            gone += delete_webhook(conn, old.id)
    return gone
