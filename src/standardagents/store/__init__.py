"""Durable storage: the ``Store`` protocol and its SQL implementation (SQLite, PostgreSQL)."""

from __future__ import annotations

from .base import Store, ToolResultRow
from .records import ApiTokenRecord, EffectRecord, SubagentRecord, UserRecord
from .sql import DATABASE_URL_ENV, SQLStore, open_store, resolve_url

__all__ = [
    "DATABASE_URL_ENV",
    "ApiTokenRecord",
    "EffectRecord",
    "SQLStore",
    "Store",
    "SubagentRecord",
    "ToolResultRow",
    "UserRecord",
    "open_store",
    "resolve_url",
]
