"""Tenants, audited approval decisions and identities from an identity provider: the audit of
approval decisions (threads carry their tenant in their metadata, so they need no column).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approval_decisions",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("execution_id", sa.String(64), nullable=False),
        sa.Column("call_id", sa.String(255), nullable=False),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("approved", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("decided_by", sa.String(255)),
        sa.Column("decided_by_name", sa.String(255)),
        sa.Column("tenant", sa.String(255)),
        sa.Column("roles", sa.JSON),
        sa.Column("decided_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_approval_decisions_decided_at", "approval_decisions", ["decided_at"])
    op.create_index("ix_approval_decisions_tenant", "approval_decisions", ["tenant", "decided_at"])
    op.create_index("ix_approval_decisions_thread", "approval_decisions", ["thread_id"])


def downgrade() -> None:
    op.drop_index("ix_approval_decisions_thread", table_name="approval_decisions")
    op.drop_index("ix_approval_decisions_tenant", table_name="approval_decisions")
    op.drop_index("ix_approval_decisions_decided_at", table_name="approval_decisions")
    op.drop_table("approval_decisions")
