"""Initial schema: threads, messages, tool results, executions, logs, files, env values,
users, API tokens, user values, scheduled effects and subagent links.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("agent", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(64)),
        sa.Column("title", sa.Text),
        sa.Column("parent_id", sa.String(64)),
        sa.Column("package", sa.String(255)),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_threads_agent", "threads", ["agent", "created_at"])
    op.create_index("ix_threads_user_id", "threads", ["user_id", "created_at"])
    op.create_index("ix_threads_parent_id", "threads", ["parent_id"])
    op.create_index("ix_threads_created_at", "threads", ["created_at"])
    op.create_table(
        "messages",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text),
        sa.Column("parts", sa.JSON),
        sa.Column("tool_calls", sa.JSON),
        sa.Column("tool_call_id", sa.String(255)),
        sa.Column("name", sa.String(255)),
        sa.Column("side", sa.String(1)),
        sa.Column("silent", sa.Boolean, nullable=False),
        sa.Column("hidden", sa.Boolean, nullable=False),
        sa.Column("attachments", sa.JSON),
        sa.Column("usage", sa.JSON),
        sa.Column("reasoning", sa.Text),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("tool_status", sa.String(16)),
        sa.Column("metadata", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger),
    )
    op.create_index("ix_messages_thread_seq", "messages", ["thread_id", "seq"])
    op.create_table(
        "tool_results",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("message_id", sa.String(64)),
        sa.Column("tool_call_id", sa.String(255)),
        sa.Column("tool_name", sa.String(255)),
        sa.Column("arguments", sa.JSON),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("result", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("stack", sa.Text),
        sa.Column("attachments", sa.JSON),
        sa.Column("metadata", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_tool_results_thread", "tool_results", ["thread_id", "tool_call_id"])
    op.create_table(
        "executions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("side", sa.String(1), nullable=False),
        sa.Column("step_count", sa.Integer, nullable=False),
        sa.Column("stop_reason", sa.Text),
        sa.Column("stopped_by", sa.String(1)),
        sa.Column("error", sa.Text),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_executions_thread", "executions", ["thread_id", "created_at"])
    op.create_index("ix_executions_status", "executions", ["status"])
    op.create_table(
        "logs",
        sa.Column("id", SEQ, primary_key=True, autoincrement=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("data", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_logs_thread", "logs", ["thread_id", "id"])
    op.create_table(
        "thread_files",
        sa.Column("thread_id", sa.String(64), primary_key=True),
        sa.Column("path", sa.String(1024), primary_key=True),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("mime_type", sa.String(255)),
        sa.Column("metadata", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "env_values",
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("scope_id", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("value", sa.JSON),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("email", sa.String(320)),
        sa.Column("is_admin", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_users_email", "users", ["email"], unique=True)
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_used_at", sa.BigInteger),
        sa.Column("revoked_at", sa.BigInteger),
    )
    op.create_index("ix_api_tokens_hash", "api_tokens", ["token_hash"], unique=True)
    op.create_index("ix_api_tokens_user", "api_tokens", ["user_id"])
    op.create_table(
        "user_values",
        sa.Column("user_id", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("value", sa.JSON),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "scheduled_effects",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("thread_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("args", sa.JSON),
        sa.Column("run_at", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("result", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("claimed_by", sa.String(255)),
        sa.Column("claimed_until", sa.BigInteger),
    )
    op.create_index("ix_scheduled_effects_due", "scheduled_effects", ["status", "run_at"])
    op.create_index("ix_scheduled_effects_thread", "scheduled_effects", ["thread_id"])
    op.create_table(
        "subagents",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("parent_thread_id", sa.String(64), nullable=False),
        sa.Column("child_thread_id", sa.String(64), nullable=False),
        sa.Column("agent", sa.String(255), nullable=False),
        sa.Column("relationship", sa.String(64)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("result", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_subagents_parent", "subagents", ["parent_thread_id", "created_at"])
    op.create_index("ix_subagents_child", "subagents", ["child_thread_id"])


def downgrade() -> None:
    op.drop_table("subagents")
    op.drop_table("scheduled_effects")
    op.drop_table("user_values")
    op.drop_table("api_tokens")
    op.drop_table("users")
    op.drop_table("env_values")
    op.drop_table("thread_files")
    op.drop_table("logs")
    op.drop_table("executions")
    op.drop_table("tool_results")
    op.drop_table("messages")
    op.drop_table("threads")
