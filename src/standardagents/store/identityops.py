"""The store's operations on identity tables: writing and reading the audit of approval
decisions. Each is one transaction on the SQL store (SQLite or PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, select

from ..exceptions import StoreError
from .base import Store
from .schema_identity import approval_decisions

__all__ = ["ApprovalDecisionRecord", "list_approval_decisions", "record_approval_decision"]

T = TypeVar("T")


@dataclass(slots=True)
class ApprovalDecisionRecord:
    """One decided call: what (tool, digest of its exact arguments), who, when and why."""

    thread_id: str
    execution_id: str
    call_id: str
    tool: str
    digest: str
    approved: bool
    decided_at: int
    reason: str | None = None
    decided_by: str | None = None
    decided_by_name: str | None = None
    tenant: str | None = None
    roles: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.execution_id}:{self.call_id}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "threadId": self.thread_id, "executionId": self.execution_id, "callId": self.call_id,
                "tool": self.tool, "digest": self.digest, "approved": self.approved, "reason": self.reason,
                "decidedBy": self.decided_by, "decidedByName": self.decided_by_name, "tenant": self.tenant,
                "roles": list(self.roles), "decidedAt": self.decided_at}


async def _run(store: Store, fn: Callable[..., T], *args: Any, write: bool = True) -> T:
    runner = getattr(store, "_run", None)
    if runner is None:
        raise StoreError(f"{type(store).__name__} keeps no audit of approval decisions (a SQL store does)")
    result: T = await runner(fn, *args, write=write)
    return result


def _insert(conn: Connection, row: dict[str, Any]) -> bool:
    # a call is decided once (the execution's compare-and-set), so only a retry finds its row
    if conn.execute(select(approval_decisions.c.id).where(approval_decisions.c.id == row["id"])).first():
        return False
    conn.execute(approval_decisions.insert().values(**row))
    return True


async def record_approval_decision(store: Store, record: ApprovalDecisionRecord) -> bool:
    """Write the decision's audit row once; False when it was there already."""
    row = {"id": record.id, "thread_id": record.thread_id, "execution_id": record.execution_id,
           "call_id": record.call_id, "tool": record.tool, "digest": record.digest, "approved": record.approved,
           "reason": record.reason, "decided_by": record.decided_by, "decided_by_name": record.decided_by_name,
           "tenant": record.tenant, "roles": list(record.roles), "decided_at": record.decided_at}
    return await _run(store, _insert, row)


def _select(conn: Connection, tenant: str | None, thread_id: str | None, limit: int, offset: int) -> list[Any]:
    query = select(approval_decisions)
    if tenant is not None:
        query = query.where(approval_decisions.c.tenant == tenant)
    if thread_id is not None:
        query = query.where(approval_decisions.c.thread_id == thread_id)
    query = query.order_by(approval_decisions.c.decided_at.desc(), approval_decisions.c.id).limit(limit).offset(offset)
    return list(conn.execute(query).mappings())


async def list_approval_decisions(store: Store, *, tenant: str | None = None, thread_id: str | None = None,
                                  limit: int = 100, offset: int = 0) -> list[ApprovalDecisionRecord]:
    """Decisions newest first, of one tenant or thread when given."""
    rows = await _run(store, _select, tenant, thread_id, limit, offset, write=False)
    return [ApprovalDecisionRecord(thread_id=r["thread_id"], execution_id=r["execution_id"], call_id=r["call_id"],
                                   tool=r["tool"], digest=r["digest"], approved=bool(r["approved"]),
                                   decided_at=int(r["decided_at"]), reason=r["reason"], decided_by=r["decided_by"],
                                   decided_by_name=r["decided_by_name"], tenant=r["tenant"],
                                   roles=list(r["roles"] or [])) for r in rows]
