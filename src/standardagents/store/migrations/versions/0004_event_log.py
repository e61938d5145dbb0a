"""The event log (recent events per stream, replayed to reconnecting clients) and its floors.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_log",
        sa.Column("stream", sa.String(80), primary_key=True),
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("first_id", sa.BigInteger, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("events", sa.Text, nullable=False),
        sa.Column("ts", sa.Float, nullable=False),
    )
    op.create_index("ix_event_log_ts", "event_log", ["ts"])
    op.create_table(
        "event_floors",
        sa.Column("stream", sa.String(80), primary_key=True),
        sa.Column("floor", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("event_floors")
    op.drop_index("ix_event_log_ts", "event_log")
    op.drop_table("event_log")
