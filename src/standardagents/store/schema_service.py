"""Tables of the service layer: schedules and their claimed ticks, webhook subscriptions with
their delivery outbox and log, quota slots, and the counting windows of shared rate limits.

Each claim is a row or a conditional update, so several workers sharing one database agree
without talking to each other: a tick is run by the worker whose insert of ``(schedule,
tick)`` succeeded, an outbox row is sent by the worker whose claim took it, a quota slot or a
window's count moves only while under its limit. Alembic revision 0009 creates the same shape
(0011 adds the execution and A2A columns of ``webhooks``).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, Text

from .schema import JSON, SeqType, metadata

__all__ = [
    "quota_slots",
    "rate_blocks",
    "rate_windows",
    "schedule_runs",
    "schedules",
    "webhook_attempts",
    "webhook_outbox",
    "webhooks",
]

schedules = Table(
    "schedules",
    metadata,
    Column("id", String(64), primary_key=True),
    #: a schedule defined in the project has its definition's name; one made over the API none
    Column("name", String(255)),
    Column("agent", String(255), nullable=False),
    Column("cron", String(255)),
    Column("interval_s", Integer),
    Column("timezone", String(64), nullable=False),
    Column("message", Text, nullable=False),
    #: the one thread every run talks in (None: a new thread each run)
    Column("thread_id", String(64)),
    Column("overlap", String(16), nullable=False),
    Column("missed", String(16), nullable=False),
    Column("paused", Boolean, nullable=False),
    #: the next tick to run (epoch milliseconds)
    Column("next_run", BigInteger, nullable=False),
    Column("last_run", BigInteger),
    Column("last_execution_id", String(64)),
    Column("user_id", String(64)),
    Column("source", String(16), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_schedules_name", "name", unique=True),
    Index("ix_schedules_due", "paused", "next_run"),
)

#: one row per tick run: its primary key is the claim (the insert succeeds for one worker)
schedule_runs = Table(
    "schedule_runs",
    metadata,
    Column("schedule_id", String(64), primary_key=True),
    Column("tick", BigInteger, primary_key=True, autoincrement=False),
    Column("worker", String(255), nullable=False),
    Column("status", String(16), nullable=False),
    Column("thread_id", String(64)),
    Column("execution_id", String(64)),
    Column("error", Text),
    Column("created_at", BigInteger, nullable=False),
)

webhooks = Table(
    "webhooks",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(255)),
    Column("url", Text, nullable=False),
    Column("events", JSON, nullable=False),
    Column("secret", String(255), nullable=False),
    #: deliveries only for events of this thread (None: every thread)
    Column("thread_id", String(64)),
    Column("user_id", String(64)),
    Column("source", String(16), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    #: deliveries only for events of this execution (None: every execution); revision 0011
    Column("execution_id", String(64)),
    #: ``webhook`` (Standard Webhooks events) or ``a2a`` (an A2A task's push notifications)
    Column("kind", String(16), nullable=False, server_default="webhook"),
    #: an ``a2a`` subscription's push-notification config, as the client set it
    Column("config", JSON),
    Index("ix_webhooks_name", "name", unique=True),
    Index("ix_webhooks_execution", "execution_id"),
)

#: events waiting to be delivered (and delivered ones, for the log and replays)
webhook_outbox = Table(
    "webhook_outbox",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("webhook_id", String(64), nullable=False),
    Column("event_type", String(64), nullable=False),
    #: what the event is about (an execution id, a schedule tick): one delivery per webhook
    Column("event_key", String(255), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("claimed_by", String(255)),
    Column("claimed_until", BigInteger),
    Column("last_error", Text),
    Column("created_at", BigInteger, nullable=False),
    Column("delivered_at", BigInteger),
    Index("ix_webhook_outbox_event", "webhook_id", "event_key", unique=True),
    Index("ix_webhook_outbox_due", "status", "next_attempt_at"),
)

#: the delivery log: one row per attempt
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column("outbox_id", String(64), nullable=False),
    Column("webhook_id", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status_code", Integer),
    Column("error", Text),
    Column("duration_ms", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_webhook_attempts_webhook", "webhook_id", "id"),
)

#: concurrency slots: a turn holds one of ``limit`` rows of its key until it ends (or the
#: lease lapses, when its process died)
quota_slots = Table(
    "quota_slots",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("holder", String(64)),
    Column("until", BigInteger),
)

#: fixed counting windows: requests and tokens of ``key`` in the window starting at ``window``
rate_windows = Table(
    "rate_windows",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("window", BigInteger, primary_key=True, autoincrement=False),
    Column("requests", Integer, nullable=False),
    Column("tokens", BigInteger, nullable=False),
)

#: a provider's 429: nobody calls ``key`` before ``until``
rate_blocks = Table(
    "rate_blocks",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("until", BigInteger, nullable=False),
)
