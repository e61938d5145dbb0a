"""Context assembly: the system prompt, and stored messages turned into model messages.

Conversions are cached per message (id, version, perspective) so assembling the context
of a long conversation costs a lookup per message, not a rebuild: a step's cost does not
grow with the conversation.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

from ..definitions import PromptDefinition, PromptEnvPart, PromptIncludePart, PromptTextPart
from ..exceptions import DefinitionError
from ..records import Message

if TYPE_CHECKING:
    from ..registry import Registry
    from .state import ThreadState

__all__ = ["EXTENSIONS", "THINKING_BLOCKS_KEY", "LLMCache", "extend_context", "extension_tools", "render_prompt",
           "to_llm_message"]

#: where an assistant message keeps the provider's thinking blocks (signed, to be sent back
#: verbatim): in its metadata, so they are stored with it and survive a restart
THINKING_BLOCKS_KEY = "thinkingBlocks"


#: capabilities above the engine that an agent definition turns on, by the field that
#: configures them: the module is imported by name only when an agent sets the field, so the
#: engine never depends on them. A module offers ``tools(rt, agent)`` and
#: ``before_model(rt, state, agent, messages)`` (which may add to ``messages`` and returns a
#: note kept on the step's reply, or None).
EXTENSIONS: dict[str, str] = {"memory": "standardagents.memory.agents"}


def _extensions(agent: Any) -> list[Any]:
    return [importlib.import_module(module) for field, module in EXTENSIONS.items()
            if getattr(agent, field, None) is not None]


def extension_tools(rt: Any, agent: Any) -> list[Any]:
    """The tool definitions the agent's extensions offer (memory's tools...)."""
    return [tool for ext in _extensions(agent) for tool in ext.tools(rt, agent)]


async def extend_context(rt: Any, state: Any, agent: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Let the agent's extensions add to the messages of a model call (recalled memory...);
    their notes, by field, for the step record."""
    notes: dict[str, Any] = {}
    for field, module in EXTENSIONS.items():
        if getattr(agent, field, None) is not None:
            note = await importlib.import_module(module).before_model(rt, state, agent, messages)
            if note:
                notes[field] = note
    return notes


def prompt_is_static(prompt: PromptDefinition, registry: Registry, namespace: str | None, _seen: frozenset[str] = frozenset()) -> bool:
    """Whether a prompt renders the same text every time (no env parts anywhere)."""
    if isinstance(prompt.prompt, str):
        return True
    for part in prompt.prompt:
        if isinstance(part, PromptEnvPart):
            return False
        if isinstance(part, PromptIncludePart) and part.prompt not in _seen:
            inner = registry.get("prompts", part.prompt, namespace)
            if not prompt_is_static(inner, registry, namespace, _seen | {prompt.name}):
                return False
    return True


async def render_prompt(prompt: PromptDefinition, state: ThreadState | None, registry: Registry,
                        namespace: str | None, _seen: tuple[str, ...] = ()) -> str:
    """The prompt's text: text parts as written, includes rendered, env values looked up."""
    if prompt.name in _seen:
        raise DefinitionError([("prompt", f"include cycle: {' -> '.join((*_seen, prompt.name))}")])
    if isinstance(prompt.prompt, str):
        return prompt.prompt
    out: list[str] = []
    for part in prompt.prompt:
        if isinstance(part, PromptTextPart):
            out.append(part.text)
        elif isinstance(part, PromptIncludePart):
            inner = await registry.aget("prompts", part.prompt, namespace)
            out.append(await render_prompt(inner, state, registry, namespace, (*_seen, prompt.name)))
        elif isinstance(part, PromptEnvPart):
            value = await state.get_env(part.key) if state is not None else None
            out.append(str(value) if value is not None else (part.default or ""))
    return "".join(out)


def _content(message: Message) -> Any:
    if message.parts:
        return message.parts
    return message.content if message.content is not None else ""


def to_llm_message(message: Message, perspective: str | None, dual: bool) -> dict[str, Any] | None:
    """One stored message as the model of ``perspective``'s side sees it (None: not shown).

    In a dual_ai thread each side reads its own replies as the assistant's and the other
    side's as the user's; the other side's tool traffic is not shown.
    """
    role = message.role
    if role == "assistant":
        if dual and message.side is not None and message.side != perspective:
            text = message.content
            return {"role": "user", "content": text} if text else None
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [tc.to_dict() for tc in message.tool_calls]
        blocks = message.metadata.get(THINKING_BLOCKS_KEY)
        if blocks:
            out["thinking_blocks"] = blocks
        return out
    if role == "tool":
        if dual and message.side is not None and message.side != perspective:
            return None
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content or ""}
    if role == "user" and dual and message.side is not None and message.side == perspective:
        # an opening message addressed to this side by the other side's label stays a user turn
        return {"role": "user", "content": _content(message)}
    return {"role": role, "content": _content(message)}


class LLMCache:
    """Memoised conversions keyed by (message id, updated_at, perspective), at most
    ``max_entries`` of them, so memory stays flat however many threads a long-lived process
    runs.

    Two generations of half the size each: new conversions go into the young one; when it is
    full it becomes the old one and the previous old one is dropped whole. A hit in the old
    generation moves the entry back into the young one, so what is in use stays. A hit costs
    one dict lookup and eviction is O(1) (an evicted message is just converted again)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max(2, max_entries)
        self._half = self.max_entries // 2
        self._cache: dict[tuple[str, int | None, str | None], dict[str, Any] | None] = {}
        self._old: dict[tuple[str, int | None, str | None], dict[str, Any] | None] = {}

    def __len__(self) -> int:
        return len(self._cache) + len(self._old)

    def convert(self, messages: list[Message], perspective: str | None, dual: bool) -> list[dict[str, Any]]:
        cache = self._cache
        out: list[dict[str, Any]] = []
        append = out.append
        for m in messages:
            if m.hidden:
                continue
            key = (m.id, m.updated_at, perspective)
            llm = cache.get(key, _MISSING)
            if llm is _MISSING:
                llm = self._old.pop(key, _MISSING)
                if llm is _MISSING:
                    llm = to_llm_message(m, perspective, dual)
                if len(cache) >= self._half:
                    self._old, self._cache = cache, {}
                    cache = self._cache
                cache[key] = llm
            if llm is not None:
                append(llm)
        return out


_MISSING: Any = object()


def dumps(value: Any) -> str:
    """Compact JSON for tool results and arguments."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def clip(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters (marked), for event payloads."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"
