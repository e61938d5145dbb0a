"""Agents that remember: the memory tools, automatic recall and the working-memory document,
as configured by ``AgentDefinition.memory``.

The engine loads this module by name only when an agent sets ``memory`` (see
:mod:`standardagents.engine.context`); it offers :func:`tools` and calls
:func:`before_model` with the messages about to be sent, which places what is recalled in a
system message marked as memory and returns the note the step record shows.
"""

from __future__ import annotations

import hashlib
import os
import re
import weakref
from typing import Any

from ..definitions import ToolDefinition, define_tool
from ..exceptions import ModelRetry
from ..toolcalls import estimate_tokens
from ._errors import MemoryRejected
from ._namespace import Namespace
from .embedders import EmbedderConfig, make_embedder
from .store import MemoryStore, WrittenBy

__all__ = ["MEMORY_HEADER", "REFRESH_TTL_ENV", "WORKING_HEADER", "before_model", "memory_filter", "memory_for",
           "no_secrets", "refresh_ttl_default", "remove_memory_filter", "tools"]

MEMORY_HEADER = "Memory: what you remembered from earlier conversations with this user (use it when relevant):"
WORKING_HEADER = "Working memory: the user's document you keep (rewrite it with memory_update_working):"
WORKING_NAMESPACE_LABEL = "working_memory"

_stores: weakref.WeakKeyDictionary[Any, dict[str, MemoryStore]] = weakref.WeakKeyDictionary()
_recalls: dict[tuple[str, str], tuple[list[Any], dict[str, Any]]] = {}

_SECRET = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{30,}|xox[abp]-[A-Za-z0-9-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|\b(password|passwd|api[_ ]?key|secret)\s*(is|:|=)\s*\S+)", re.I)


def no_secrets(namespace: Namespace, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """The filter every agent write passes: API keys, private keys and stated passwords are not kept."""
    if _SECRET.search(str(value)):
        raise MemoryRejected("it looks like a secret (a password, API key or private key); secrets are not remembered")
    return value


#: filters a project registers with :func:`memory_filter`, run on every agent's and the server's writes
_project_filters: list[Any] = []


def memory_filter(hook: Any) -> Any:
    """Register a filter for every memory write of agents and the server (a decorator): it gets
    ``(namespace, key, value)`` and returns the value to keep (possibly changed) or raises
    :class:`~standardagents.memory.MemoryRejected`. Registering the same function twice keeps one."""
    if hook not in _project_filters:
        _project_filters.append(hook)
    return hook


def remove_memory_filter(hook: Any) -> None:
    """Stop running a filter registered with :func:`memory_filter`."""
    if hook in _project_filters:
        _project_filters.remove(hook)


async def _registered(namespace: Namespace, key: str, value: dict[str, Any]) -> dict[str, Any]:
    for hook in list(_project_filters):
        result = hook(namespace, key, value)
        value = await result if hasattr(result, "__await__") else result
    return value


#: ``0`` / ``false``: reads do not restart items' time to live unless asked (default: they do)
REFRESH_TTL_ENV = "STANDARDAGENTS_MEMORY_REFRESH_TTL"


def refresh_ttl_default() -> bool:
    """The store-wide default of ``refresh_ttl``, from :data:`REFRESH_TTL_ENV`."""
    raw = os.environ.get(REFRESH_TTL_ENV, "").strip().lower()
    return raw not in ("0", "false", "no", "off")


async def memory_for(rt: Any, embedder: str | dict[str, Any] | None = "offline") -> MemoryStore:
    """The memory store of a runtime's database for one embedder, shared by its agents and its server."""
    config = EmbedderConfig.model_validate(embedder) if isinstance(embedder, dict) else embedder
    made = make_embedder(config)
    by_name = _stores.setdefault(rt, {})
    memory = by_name.get(made.name)
    if memory is None:
        memory = by_name[made.name] = MemoryStore(rt.store, embedder=made, filters=[no_secrets, _registered],
                                                  refresh_ttl=refresh_ttl_default())
        await memory.open()
    return memory


def _namespace(agent: Any, state: Any) -> Namespace:
    user = state.user_id or f"thread-{state.thread_id}"
    return tuple(label.replace("{user_id}", user).replace("{agent}", agent.name) for label in agent.memory.namespace)


def _working(state: Any) -> Namespace:
    return ("user", state.user_id or f"thread-{state.thread_id}", WORKING_NAMESPACE_LABEL)


def _writer(state: Any, tool: str) -> WrittenBy:
    execution = getattr(state, "execution", None)
    return WrittenBy(thread_id=state.thread_id, execution_id=getattr(execution, "id", None), tool=tool,
                     user_id=state.user_id)


def tools(rt: Any, agent: Any) -> list[ToolDefinition]:
    """The memory tools the agent's settings turn on."""
    cfg = agent.memory
    out: list[ToolDefinition] = []

    async def store() -> MemoryStore:
        return await memory_for(rt, cfg.embedder)

    if cfg.tools:
        async def save(state: Any, args: dict[str, Any]) -> str:
            text = str(args.get("content") or "").strip()
            if not text:
                raise ModelRetry("Give the fact to remember in 'content'.")
            key = str(args.get("key") or "") or "m-" + hashlib.sha256(text.encode()).hexdigest()[:16]
            try:
                await (await store()).put(_namespace(agent, state), key, {"text": text},
                                          written_by=_writer(state, "memory_save"))
            except MemoryRejected as exc:
                return f"Not saved: {exc.reason}."
            _forget_recalls(state.thread_id)
            return f"Saved to memory as {key!r}."

        async def search(state: Any, args: dict[str, Any]) -> list[dict[str, Any]]:
            query = str(args.get("query") or "")
            limit = int(args.get("limit") or 5)
            hits = await (await store()).search(_namespace(agent, state), query=query or None, limit=max(1, min(limit, 20)))
            return [{"key": h.key, "text": h.value.get("text", h.value), "score": round(h.score, 3) if h.score is not None else None}
                    for h in hits]

        async def forget(state: Any, args: dict[str, Any]) -> str:
            key = str(args.get("key") or "")
            if not key:
                raise ModelRetry("Give the key of the memory to forget (memory_search shows keys).")
            removed = await (await store()).delete(_namespace(agent, state), key)
            _forget_recalls(state.thread_id)
            return f"Forgot {key!r}." if removed else f"There is no memory {key!r}."

        out += [
            define_tool(name="memory_save", execute=save,
                        description="Remember a fact about the user or a decision for later conversations.",
                        parameters={"type": "object", "properties": {
                            "content": {"type": "string", "description": "The fact to remember, in one sentence."},
                            "key": {"type": "string", "description": "Optional: a key to replace an earlier memory."}},
                            "required": ["content"], "additionalProperties": False}),
            define_tool(name="memory_search", execute=search, idempotent=True,
                        description="Search your memory of earlier conversations with this user.",
                        parameters={"type": "object", "properties": {
                            "query": {"type": "string", "description": "What to look for."},
                            "limit": {"type": "integer", "description": "How many results (at most 20).", "default": 5}},
                            "required": ["query"], "additionalProperties": False}),
            define_tool(name="memory_forget", execute=forget,
                        description="Forget one remembered fact, by its key (memory_search shows keys).",
                        parameters={"type": "object", "properties": {
                            "key": {"type": "string", "description": "The memory's key."}},
                            "required": ["key"], "additionalProperties": False}),
        ]
    if cfg.working_memory:
        async def update_working(state: Any, args: dict[str, Any]) -> str:
            text = str(args.get("document") or "")
            try:
                await (await store()).put(_working(state), "document", {"text": text}, index=False,
                                          written_by=_writer(state, "memory_update_working"))
            except MemoryRejected as exc:
                return f"Not saved: {exc.reason}."
            return "Working memory updated."

        out.append(define_tool(
            name="memory_update_working", execute=update_working,
            description="Rewrite the user's working-memory document (their profile, preferences and open tasks).",
            parameters={"type": "object", "properties": {
                "document": {"type": "string", "description": "The whole new document (markdown)."}},
                "required": ["document"], "additionalProperties": False}))
    return out


def _forget_recalls(thread_id: str) -> None:
    for key in [k for k in _recalls if k[0] == thread_id]:
        _recalls.pop(key, None)


def _last_user_text(messages: list[dict[str, Any]]) -> tuple[int, str] | None:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return i, str(content or "")
    return None


async def before_model(rt: Any, state: Any, agent: Any, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Place recalled memory (and the working-memory document) in ``messages`` before the
    last user message; the note for the step record: what was recalled, and why or why not."""
    cfg = agent.memory
    if not (cfg.recall or cfg.working_memory):
        return None
    found = _last_user_text(messages)
    if found is None:
        return None
    at, query = found
    note: dict[str, Any] = {}
    inserts: list[dict[str, Any]] = []
    memory = await memory_for(rt, cfg.embedder)
    if cfg.working_memory:
        doc = await memory.get(_working(state), "document")
        text = str(doc.value.get("text", "")) if doc is not None else ""
        note["workingMemory"] = {"chars": len(text)}
        inserts.append({"role": "system", "content": f"{WORKING_HEADER}\n{text or '(empty)'}"})
    if cfg.recall and query.strip():
        cache_key = (state.thread_id, query)
        cached = _recalls.get(cache_key)
        if cached is None:
            hits = await memory.search(_namespace(agent, state), query=query, limit=cfg.recall_limit)
            lines: list[str] = []
            recalled: list[dict[str, Any]] = []
            skipped: list[dict[str, Any]] = []
            used = estimate_tokens(MEMORY_HEADER)
            for hit in hits:
                text = str(hit.value.get("text", hit.value))
                entry = {"namespace": list(hit.namespace), "key": hit.key, "score": round(hit.score or 0.0, 4)}
                if (hit.score or 0.0) < cfg.min_score:
                    skipped.append({**entry, "reason": f"score below {cfg.min_score}"})
                    continue
                cost = estimate_tokens(f"- {text}")
                if used + cost > cfg.recall_budget:
                    skipped.append({**entry, "reason": f"over the budget of {cfg.recall_budget} tokens"})
                    continue
                used += cost
                lines.append(f"- {text}")
                recalled.append({**entry, "tokens": cost})
            record = {"query": query[:500], "recalled": recalled, "skipped": skipped,
                      "tokens": used if lines else 0, "budget": cfg.recall_budget}
            cached = (lines, record)
            if len(_recalls) > 1000:
                _recalls.clear()
            _recalls[cache_key] = cached
        lines, record = cached
        note["recall"] = record
        if lines:
            inserts.append({"role": "system", "content": MEMORY_HEADER + "\n" + "\n".join(lines)})
    messages[at:at] = inserts
    return note or None
