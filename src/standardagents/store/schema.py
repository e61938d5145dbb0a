"""The database schema as SQLAlchemy Core tables.

The statements in :mod:`standardagents.store.ops` are built from these tables; the
Alembic revisions create the same shape, so the two must change together.
"""

from __future__ import annotations

from sqlalchemy import JSON as sa_JSON
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = [
    "api_tokens",
    "env_values",
    "event_floors",
    "event_log",
    "executions",
    "logs",
    "messages",
    "metadata",
    "scheduled_effects",
    "subagents",
    "thread_files",
    "threads",
    "tool_results",
    "user_values",
    "users",
]

metadata = MetaData()

# SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (its fast autoincrement).
SeqType = BigInteger().with_variant(Integer(), "sqlite")
# Python None is stored as SQL NULL (not the JSON text 'null'), so reads skip decoding it.
JSON = sa_JSON(none_as_null=True)

threads = Table(
    "threads",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("agent", String(255), nullable=False),
    Column("user_id", String(64)),
    Column("title", Text),
    Column("parent_id", String(64)),
    Column("package", String(255)),
    Column("metadata", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_threads_agent", "agent", "created_at"),
    Index("ix_threads_user_id", "user_id", "created_at"),
    Index("ix_threads_parent_id", "parent_id"),
    Index("ix_threads_created_at", "created_at"),
)

messages = Table(
    "messages",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("thread_id", String(64), nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", Text),
    Column("parts", JSON),
    Column("tool_calls", JSON),
    Column("tool_call_id", String(255)),
    Column("name", String(255)),
    Column("side", String(1)),
    Column("silent", Boolean, nullable=False),
    Column("hidden", Boolean, nullable=False),
    Column("attachments", JSON),
    Column("usage", JSON),
    Column("reasoning", Text),
    Column("status", String(32), nullable=False),
    Column("tool_status", String(16)),
    Column("metadata", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger),
    Column("cost", Float),
    Index("ix_messages_thread_seq", "thread_id", "seq"),
    # where a turn's context starts: the thread's oldest message not hidden (contextops)
    Index("ix_messages_thread_hidden_seq", "thread_id", "hidden", "seq"),
)

tool_results = Table(
    "tool_results",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("thread_id", String(64), nullable=False),
    Column("message_id", String(64)),
    Column("tool_call_id", String(255)),
    Column("tool_name", String(255)),
    Column("arguments", JSON),
    Column("status", String(16), nullable=False),
    Column("result", Text),
    Column("error", Text),
    Column("stack", Text),
    Column("attachments", JSON),
    Column("metadata", JSON),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_tool_results_thread", "thread_id", "tool_call_id"),
)

executions = Table(
    "executions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("thread_id", String(64), nullable=False),
    Column("status", String(32), nullable=False),
    Column("side", String(1), nullable=False),
    Column("step_count", Integer, nullable=False),
    Column("stop_reason", Text),
    Column("stopped_by", String(1)),
    Column("error", Text),
    Column("state", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    # the fencing token: grows by one on each takeover; writes are conditional on it
    Column("epoch", Integer, nullable=False, server_default="0"),
    Index("ix_executions_thread", "thread_id", "created_at"),
    Index("ix_executions_status", "status"),
)

logs = Table(
    "logs",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column("thread_id", String(64), nullable=False),
    Column("level", String(16), nullable=False),
    Column("message", Text, nullable=False),
    Column("data", JSON),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_logs_thread", "thread_id", "id"),
)

thread_files = Table(
    "thread_files",
    metadata,
    Column("thread_id", String(64), primary_key=True),
    Column("path", String(1024), primary_key=True),
    Column("content", LargeBinary, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("mime_type", String(255)),
    Column("metadata", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

env_values = Table(
    "env_values",
    metadata,
    Column("scope", String(16), primary_key=True),
    Column("scope_id", String(64), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("value", JSON),
    Column("updated_at", BigInteger, nullable=False),
)

users = Table(
    "users",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("email", String(320)),
    Column("is_admin", Boolean, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_users_email", "email", unique=True),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(64), nullable=False),
    Column("name", String(255), nullable=False),
    Column("token_hash", String(64), nullable=False),
    Column("prefix", String(32), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("last_used_at", BigInteger),
    Column("revoked_at", BigInteger),
    Index("ix_api_tokens_hash", "token_hash", unique=True),
    Index("ix_api_tokens_user", "user_id"),
)

user_values = Table(
    "user_values",
    metadata,
    Column("user_id", String(64), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("value", JSON),
    Column("updated_at", BigInteger, nullable=False),
)

scheduled_effects = Table(
    "scheduled_effects",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("thread_id", String(64), nullable=False),
    Column("name", String(255), nullable=False),
    Column("args", JSON),
    Column("run_at", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text),
    Column("result", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("claimed_by", String(255)),
    Column("claimed_until", BigInteger),
    Column("trace", JSON),
    Index("ix_scheduled_effects_due", "status", "run_at"),
    Index("ix_scheduled_effects_thread", "thread_id"),
)

subagents = Table(
    "subagents",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("parent_thread_id", String(64), nullable=False),
    Column("child_thread_id", String(64), nullable=False),
    Column("agent", String(255), nullable=False),
    Column("relationship", String(64)),
    Column("status", String(32), nullable=False),
    Column("result", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Index("ix_subagents_parent", "parent_thread_id", "created_at"),
    Index("ix_subagents_child", "child_thread_id"),
)

#: recent events of each stream (a thread, or ``user:<id>``), for clients that reconnect: one
#: row per batch written (``id`` its last event's id, ``events`` a JSON list of
#: ``[id, type, data, ts]``), so token deltas cost no row each; trimmed by count and age
#: (:mod:`standardagents.eventlog`)
event_log = Table(
    "event_log",
    metadata,
    Column("stream", String(80), primary_key=True),
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("first_id", BigInteger, nullable=False),
    Column("count", Integer, nullable=False),
    Column("events", Text, nullable=False),
    Column("ts", Float, nullable=False),
    Index("ix_event_log_ts", "ts"),
)

#: per stream, the highest event id trimmed away: a client asking for events after an older
#: id has missed some for good
event_floors = Table(
    "event_floors",
    metadata,
    Column("stream", String(80), primary_key=True),
    Column("floor", BigInteger, nullable=False),
)

# the features' own tables join this metadata
from . import schema_evals, schema_identity, schema_memory, schema_service  # noqa: E402,F401
