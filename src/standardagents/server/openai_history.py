"""A Chat Completions request's message list as thread history.

OpenAI clients are stateless: each request carries the whole conversation. The door turns
that list into stored messages so the agent answers the last one with its context:

- no thread named: every message before the last becomes the new thread's history;
- a thread named: the earlier messages the thread already holds (same role and text, in the
  same order, possibly with the agent's own tool traffic in between) are not stored again;
  the first one it does not hold and every one after it are appended in order.

The last message is always new: it is what the agent answers.
"""

from __future__ import annotations

from typing import Any

from ..records import Message, ToolCall
from .errors import ApiError

__all__ = ["new_history", "text_of", "to_message"]

#: content part types whose ``text`` is read as the message's text
_TEXT_PARTS = ("text", "input_text", "output_text")
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def text_of(content: Any) -> str | None:
    """The text of a message's content (a string, or its text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in _TEXT_PARTS]
        if not all(isinstance(t, str) for t in texts):
            raise ApiError(400, "a text content part's 'text' must be a string")
        return "".join(texts) if texts else None
    return None


def _tool_calls(raw: Any, where: str) -> list[ToolCall] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ApiError(400, f"{where}.tool_calls must be a list")
    calls: list[ToolCall] = []
    for k, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(fn, dict) \
                or not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments", ""), str):
            raise ApiError(400, f"{where}.tool_calls[{k}] must be {{'id': str, 'type': 'function', "
                                "'function': {'name': str, 'arguments': str}}")
        calls.append(ToolCall(id=call["id"], name=fn["name"], arguments=fn.get("arguments") or "{}"))
    return calls or None


def to_message(thread_id: str, raw: dict[str, Any], index: int) -> Message:
    """One request message as a stored message (400 naming the place when it cannot be)."""
    where = f"messages[{index}]"
    role = _ROLES.get(raw["role"])
    if role is None:
        raise ApiError(400, f"{where}.role {raw['role']!r} is not one of system, developer, user, assistant, tool")
    text = text_of(raw.get("content"))
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ApiError(400, f"{where}.tool_call_id is required on a tool message")
        return Message(thread_id=thread_id, role="tool", content=text or "", tool_call_id=call_id,
                       tool_status="success", metadata={"source": "openai"})
    calls = _tool_calls(raw.get("tool_calls"), where) if role == "assistant" else None
    return Message(thread_id=thread_id, role=role, content=text, tool_calls=calls,  # type: ignore[arg-type]
                   metadata={"source": "openai"})


def _same(stored: Message, sent: Message) -> bool:
    if stored.role != sent.role:
        return False
    if sent.role == "tool":
        return stored.tool_call_id == sent.tool_call_id
    if sent.tool_calls:
        return [c.id for c in stored.tool_calls or []] == [c.id for c in sent.tool_calls]
    return (stored.content or "").strip() == (sent.content or "").strip()


def new_history(stored: list[Message], sent: list[Message]) -> list[Message]:
    """The messages of ``sent`` (all but the request's last) the thread does not hold yet:
    the longest leading run found in ``stored`` in order is dropped, the rest kept."""
    position = 0
    held = 0
    for message in sent:
        found = next((j for j in range(position, len(stored)) if _same(stored[j], message)), None)
        if found is None:
            break
        position = found + 1
        held += 1
    return sent[held:]
