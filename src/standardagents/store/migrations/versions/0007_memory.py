"""Long-term memory items, their vectors and working-memory documents.

Working-memory documents are items themselves (``user.<id>.working_memory``). On PostgreSQL
where the ``vector`` extension (pgvector) can be created, the vectors table also gets an
``embedding`` column of pgvector's type; elsewhere nothing is created for it and the memory
store says at start-up that search falls back to an exact scan.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_items",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("namespace", sa.String(1024), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", sa.JSON, nullable=False),
        sa.Column("owner", sa.String(64)),
        sa.Column("written_by", sa.JSON),
        sa.Column("indexed_text", sa.String),
        sa.Column("ttl_minutes", sa.BigInteger),
        sa.Column("expires_at", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("namespace", "key", name="uq_memory_items_namespace_key"),
    )
    op.create_index("ix_memory_items_owner", "memory_items", ["owner"])
    op.create_index("ix_memory_items_expires", "memory_items", ["expires_at"])
    # namespace prefix searches are LIKE 'a.b.%': answered by an index of byte order on PostgreSQL
    op.create_index("ix_memory_items_namespace_pattern", "memory_items", ["namespace"],
                    postgresql_ops={"namespace": "text_pattern_ops"})
    op.create_table(
        "memory_vectors",
        sa.Column("item_id", sa.String(64), primary_key=True),
        sa.Column("embedder", sa.String(255), nullable=False),
        sa.Column("dims", sa.Integer, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_memory_vectors_embedder", "memory_vectors", ["embedder", "dims"])
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        schema = _vector_schema(bind)
        if schema is not None:
            quoted = bind.dialect.identifier_preparer.quote_schema(schema)
            op.execute(f"ALTER TABLE memory_vectors ADD COLUMN embedding {quoted}.vector")


def _vector_schema(bind: sa.Connection) -> str | None:
    """The schema holding pgvector's ``vector`` type, creating the extension when the server
    has it (in a savepoint: a role that may not create it leaves the upgrade going on)."""
    available = bind.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).first()
    if available is None:
        return None
    installed = bind.execute(sa.text(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'")).scalar()
    if installed is not None:
        return str(installed)
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"))
    except sa.exc.DBAPIError:
        return None
    return "public"


def downgrade() -> None:
    op.drop_table("memory_vectors")
    op.drop_index("ix_memory_items_expires", "memory_items")
    op.drop_index("ix_memory_items_owner", "memory_items")
    op.drop_table("memory_items")
