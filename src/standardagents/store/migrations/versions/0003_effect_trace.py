"""The trace context of the span that scheduled each effect (NULL: not traced), so the
effect's own span links back to it whenever and wherever it runs.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scheduled_effects") as batch:
        batch.add_column(sa.Column("trace", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("scheduled_effects") as batch:
        batch.drop_column("trace")
