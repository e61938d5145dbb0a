"""How an agent uses long-term memory (``AgentDefinition.memory``).

The three ways are each switched here: tools the model calls (``memory_save``,
``memory_search``, ``memory_forget``), automatic recall of the best matches for each new
message (within a token budget, marked as memory) and a per-user working-memory document the
model may rewrite (``memory_update_working``). Namespaces are templates: ``{user_id}`` is the
thread's user, so one user's memory never reaches another's thread.
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import Field, field_validator

from ._base import Definition

__all__ = ["AgentMemory", "AgentMemoryFields"]


class AgentMemory(Definition):
    """An agent's memory settings; every field has a sensible default (``memory={}`` is on)."""

    #: offer memory_save / memory_search / memory_forget to the model
    tools: bool = True
    #: place the best matches for the new message in the context before each model call
    recall: bool = True
    recall_limit: int = Field(default=5, ge=1, le=50)
    #: the most tokens (estimated) recalled memory may add to one model call
    recall_budget: int = Field(default=300, ge=10, le=20_000)
    #: matches scoring below this similarity are not recalled
    min_score: float = Field(default=0.1, ge=-1.0, le=1.0)
    #: keep a per-user working-memory document in the system context, rewritten by a tool
    working_memory: bool = False
    #: where this agent's memories live; ``{user_id}`` and ``{agent}`` are filled in
    namespace: list[str] = Field(default_factory=lambda: ["user", "{user_id}", "memories"])
    #: ``"offline"``, ``"openai:<model>"`` or an embedding model definition
    #: (``{"provider": "openai", "model": ..., "baseUrl": ..., "apiKeyEnv": ..., "dimensions": ...}``)
    embedder: str | dict[str, Any] = "offline"

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: list[str]) -> list[str]:
        if not value or any(not label or "." in label for label in value):
            raise ValueError("namespace must be a list of non-empty labels without dots, e.g. ['user', '{user_id}', 'memories']")
        return value


class AgentMemoryFields(TypedDict, total=False):
    """``AgentMemory`` as a dict, for type checkers and editors."""

    tools: bool
    recall: bool
    recall_limit: int
    recall_budget: int
    min_score: float
    working_memory: bool
    namespace: list[str]
    embedder: str | dict[str, Any]
