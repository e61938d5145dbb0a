"""Bring a database to the newest schema with the package's own Alembic migrations.

Users never need an ``alembic.ini``: the configuration is built here and points at the
``migrations`` folder shipped inside the package.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text

__all__ = ["MIGRATIONS_DIR", "alembic_config", "upgrade_to_head"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

# Any fixed 64-bit number: serialises concurrent upgrades of one PostgreSQL database.
_PG_LOCK_KEY = 0x5AA6E175


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the package migrations, bound to ``connection`` if given."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade_to_head(connection: Connection, *, schema: str | None = None) -> None:
    """Run every pending migration on ``connection`` inside its current transaction.

    On PostgreSQL a transaction-scoped advisory lock makes concurrent opens wait for the
    first one instead of racing to create the same tables.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        if schema:
            quoted = connection.dialect.identifier_preparer.quote_schema(schema)
            connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {quoted}"))
    command.upgrade(alembic_config(connection), "head")
