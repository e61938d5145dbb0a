"""An index on messages (thread_id, hidden, seq): a turn finds where its context starts (the
thread's oldest message not hidden) without reading the compacted messages before it.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_messages_thread_hidden_seq", "messages", ["thread_id", "hidden", "seq"])


def downgrade() -> None:
    op.drop_index("ix_messages_thread_hidden_seq", table_name="messages")
