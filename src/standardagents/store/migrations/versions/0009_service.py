"""Schedules, webhook subscriptions and their delivery outbox, quota counters and shared rate limits.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(255)),
        sa.Column("agent", sa.String(255), nullable=False),
        sa.Column("cron", sa.String(255)),
        sa.Column("interval_s", sa.Integer),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("thread_id", sa.String(64)),
        sa.Column("overlap", sa.String(16), nullable=False),
        sa.Column("missed", sa.String(16), nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("next_run", sa.BigInteger, nullable=False),
        sa.Column("last_run", sa.BigInteger),
        sa.Column("last_execution_id", sa.String(64)),
        sa.Column("user_id", sa.String(64)),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_schedules_name", "schedules", ["name"], unique=True)
    op.create_index("ix_schedules_due", "schedules", ["paused", "next_run"])
    op.create_table(
        "schedule_runs",
        sa.Column("schedule_id", sa.String(64), primary_key=True),
        sa.Column("tick", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("worker", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.String(64)),
        sa.Column("execution_id", sa.String(64)),
        sa.Column("error", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(255)),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("events", sa.JSON, nullable=False),
        sa.Column("secret", sa.String(255), nullable=False),
        sa.Column("thread_id", sa.String(64)),
        sa.Column("user_id", sa.String(64)),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_webhooks_name", "webhooks", ["name"], unique=True)
    op.create_table(
        "webhook_outbox",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("webhook_id", sa.String(64), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("event_key", sa.String(255), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("claimed_by", sa.String(255)),
        sa.Column("claimed_until", sa.BigInteger),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("delivered_at", sa.BigInteger),
    )
    op.create_index("ix_webhook_outbox_event", "webhook_outbox", ["webhook_id", "event_key"], unique=True)
    op.create_index("ix_webhook_outbox_due", "webhook_outbox", ["status", "next_attempt_at"])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("outbox_id", sa.String(64), nullable=False),
        sa.Column("webhook_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.Text),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_webhook_attempts_webhook", "webhook_attempts", ["webhook_id", "id"])
    op.create_table(
        "quota_slots",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(64)),
        sa.Column("until", sa.BigInteger),
    )
    op.create_table(
        "rate_windows",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("window", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("requests", sa.Integer, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "rate_blocks",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("until", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    for table in ("rate_blocks", "rate_windows", "quota_slots", "webhook_attempts", "webhook_outbox", "webhooks",
                  "schedule_runs", "schedules"):
        op.drop_table(table)
