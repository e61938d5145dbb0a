"""The USD cost of the model call behind each message (NULL: not a model reply, or no price).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("cost", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("cost")
