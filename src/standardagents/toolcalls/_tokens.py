"""A deliberately low token estimate for everything that has to guess at a context window.

Characters over four undercounts most text a little; a low guess compacts slightly late,
which the endpoint's own limit then catches, whereas a high guess would fold history that fit.
It needs no tokenizer, so it is the same for every model and costs microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MESSAGE_OVERHEAD", "estimate_tokens"]

MESSAGE_OVERHEAD = 4
"""Tokens counted per chat message for its role and framing."""


def estimate_tokens(text_or_messages: str | Mapping[str, Any] | Iterable[Any] | None) -> int:
    """Estimated tokens of a text, one chat message, or a list of chat messages.

    Text counts ``ceil(len / 4)``. A message counts its text content (string or text parts),
    its name, each tool call's name and arguments, plus :data:`MESSAGE_OVERHEAD`.
    """
    if text_or_messages is None:
        return 0
    if isinstance(text_or_messages, str):
        return -(-len(text_or_messages) // 4)
    # a plain dict first: the Mapping check goes through the ABC machinery, many times slower
    if type(text_or_messages) is dict or isinstance(text_or_messages, Mapping):
        return -(-_message_chars(text_or_messages) // 4) + MESSAGE_OVERHEAD
    total = 0
    for message in text_or_messages:
        if isinstance(message, str):
            total += -(-len(message) // 4)
        elif type(message) is dict or isinstance(message, Mapping):
            total += -(-_message_chars(message) // 4) + MESSAGE_OVERHEAD
    return total


def _message_chars(message: Mapping[str, Any]) -> int:
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                chars += len(part)
            elif type(part) is dict or isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    chars += len(text)
    name = message.get("name")
    if isinstance(name, str):
        chars += len(name)
    calls = message.get("tool_calls")
    if calls:
        for call in calls:
            fn = call.get("function") if type(call) is dict or isinstance(call, Mapping) else None
            if type(fn) is dict or isinstance(fn, Mapping):
                chars += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    return chars
