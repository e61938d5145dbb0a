"""Long-term memory: items under namespaces, searched by meaning, that agents save, recall
and forget across threads.

``MemoryStore`` keeps items on the runtime's own database (SQLite or PostgreSQL); an
``Embedder`` makes them searchable by meaning, on pgvector or sqlite-vec where the database
has it and an exact scan otherwise.
"""

from __future__ import annotations

from ._errors import EmbedderError, MemoryInputError, MemoryRejected, MemoryStoreError
from ._namespace import Namespace
from .agents import memory_filter
from .embedders import Embedder, EmbedderConfig, OfflineEmbedder, OpenAIEmbedder, make_embedder
from .store import MAX_VALUE_BYTES, Item, MemoryFilter, MemoryStore, WrittenBy

__all__ = [
    "MAX_VALUE_BYTES",
    "Embedder",
    "EmbedderConfig",
    "EmbedderError",
    "Item",
    "MemoryFilter",
    "MemoryInputError",
    "MemoryRejected",
    "MemoryStore",
    "MemoryStoreError",
    "Namespace",
    "OfflineEmbedder",
    "OpenAIEmbedder",
    "WrittenBy",
    "make_embedder",
    "memory_filter",
]
