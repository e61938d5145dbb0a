"""Long-term memory's tables: items under a namespace, and their embedding vectors.

An item is a JSON object under a dotted namespace (``user.u1.preferences``) and a key. Its
vector lives in a table of its own, tagged with the embedder that made it, so a change of
embedder leaves the old vectors visible as stale (and re-embedding is a command) instead of
mixing two vector spaces. On PostgreSQL with ``pgvector`` the vector table also gets an
``embedding vector`` column (revision 0007 adds it only where the extension exists).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    UniqueConstraint,
)

from .schema import JSON, metadata

__all__ = ["memory_items", "memory_vectors"]

memory_items = Table(
    "memory_items",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("namespace", String(1024), nullable=False),
    Column("key", String(255), nullable=False),
    Column("value", JSON, nullable=False),
    #: the user the item belongs to (``user.<id>...`` namespaces), so forgetting a user is one delete
    Column("owner", String(64)),
    #: who wrote it: ``{"threadId", "executionId", "tool", "userId"}`` as known
    Column("written_by", JSON),
    #: the text that was embedded (None: the item is not in the semantic index)
    Column("indexed_text", String),
    Column("ttl_minutes", BigInteger),
    Column("expires_at", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("namespace", "key", name="uq_memory_items_namespace_key"),
    Index("ix_memory_items_owner", "owner"),
    Index("ix_memory_items_expires", "expires_at"),
    # namespace prefix searches are ``LIKE 'a.b.%'``: PostgreSQL answers them from an index in
    # byte order (text_pattern_ops); SQLite's range on the namespace uses it as it is
    Index("ix_memory_items_namespace_pattern", "namespace", postgresql_ops={"namespace": "text_pattern_ops"}),
)

memory_vectors = Table(
    "memory_vectors",
    metadata,
    Column("item_id", String(64), primary_key=True),
    Column("embedder", String(255), nullable=False),
    Column("dims", Integer, nullable=False),
    #: little-endian float32, L2-normalised: what sqlite-vec and the exact scan read
    Column("vector", LargeBinary, nullable=False),
    Index("ix_memory_vectors_embedder", "embedder", "dims"),
)
