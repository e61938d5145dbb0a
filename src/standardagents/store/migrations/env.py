"""Alembic environment: runs on the connection the store hands over, never from an ini file."""

from __future__ import annotations

from alembic import context

from standardagents.store.schema import metadata

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reached when run outside the store
    raise RuntimeError("standardagents migrations run through standardagents.store.migrate")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
