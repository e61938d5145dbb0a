"""Tables of identity: the audit of approval decisions (who decided which call, bound to a
digest of the tool and its exact arguments, when and why). Alembic revision 0008 creates the
same shape."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, String, Table, Text

from .schema import JSON, metadata

__all__ = ["approval_decisions"]

approval_decisions = Table(
    "approval_decisions",
    metadata,
    #: ``execution id:call id``: a call is decided once, so its row is written once
    Column("id", String(200), primary_key=True),
    Column("thread_id", String(64), nullable=False),
    Column("execution_id", String(64), nullable=False),
    Column("call_id", String(255), nullable=False),
    Column("tool", String(255), nullable=False),
    #: SHA-256 of the tool name and its canonical arguments: what exactly was decided
    Column("digest", String(64), nullable=False),
    Column("approved", Boolean, nullable=False),
    Column("reason", Text),
    #: the decider's user id, name, tenant and roles (None: an operator on the command line)
    Column("decided_by", String(255)),
    Column("decided_by_name", String(255)),
    Column("tenant", String(255)),
    Column("roles", JSON),
    Column("decided_at", BigInteger, nullable=False),
    Index("ix_approval_decisions_decided_at", "decided_at"),
    Index("ix_approval_decisions_tenant", "tenant", "decided_at"),
    Index("ix_approval_decisions_thread", "thread_id"),
)
