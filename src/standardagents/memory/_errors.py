"""Memory's errors, in the package's own tree (``StandardAgentsError``).

A bad namespace, key, value or filter is the caller's mistake (:class:`MemoryInputError`,
a 4xx over HTTP); an embedder that cannot be reached is a failure at run time
(:class:`EmbedderError`, a 503); a write refused by a filter hook is :class:`MemoryRejected`.
"""

from __future__ import annotations

from ..exceptions import RuntimeFailure, StandardAgentsError

__all__ = ["EmbedderError", "MemoryInputError", "MemoryRejected", "MemoryStoreError"]


class MemoryStoreError(StandardAgentsError):
    """Root of the memory store's errors."""


class MemoryInputError(MemoryStoreError, ValueError):
    """A namespace, key, value, filter or option that cannot be used; the message names it."""


class MemoryRejected(MemoryStoreError):
    """A filter hook refused to keep a value (``reason`` says why); nothing was written."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EmbedderError(MemoryStoreError, RuntimeFailure):
    """The embedding model failed or could not be reached; nothing was written."""
