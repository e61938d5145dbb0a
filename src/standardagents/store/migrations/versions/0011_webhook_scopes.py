"""Webhook subscriptions scoped to one execution, and A2A push-notification configs.

A subscription made with a message (``webhook`` of ``POST /api/threads/{id}/messages``) gets
only that execution's events; an A2A push-notification config is a subscription of kind
``a2a`` for its task (the execution of the same id), keeping the config the client set.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("execution_id", sa.String(64)))
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="webhook"))
        batch.add_column(sa.Column("config", sa.JSON))
    op.create_index("ix_webhooks_execution", "webhooks", ["execution_id"])


def downgrade() -> None:
    op.drop_index("ix_webhooks_execution", table_name="webhooks")
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("config")
        batch.drop_column("kind")
        batch.drop_column("execution_id")
