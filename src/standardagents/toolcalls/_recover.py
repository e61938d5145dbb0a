"""Tool calls a model typed into its reply as text instead of sending them as calls.

Local models often print the call in their own template's syntax (Hermes ``<tool_call>``,
Llama ``<function=...>`` and ``<|python_tag|>``, Mistral ``[TOOL_CALLS]``, or a fenced JSON
block). Recovering them keeps the loop going; only known tool names count, so prose that
merely shows JSON is left alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import json_repair

from ._arguments import find_json_end, parse_tool_arguments

__all__ = ["RecoveredCall", "recover_tool_calls"]


@dataclass(frozen=True, slots=True)
class RecoveredCall:
    """One call found in a reply's text: the tool, its arguments and the text it came from."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""


_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(
    r"```(?:json|tool_call|tool|javascript|js)?[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL
)
_FUNCTION = re.compile(r"<function=([A-Za-z0-9_.:-]+)>\s*(.*?)\s*</function>", re.DOTALL)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]\s*")
_PYTHON_TAG = re.compile(r"<\|python_tag\|>\s*")
_ARGS_FORM = re.compile(r"([A-Za-z0-9_.:-]+)\[ARGS\]")
_SEMICOLON = re.compile(r"\s*;\s*")
_END_TOKENS = re.compile(r"\s*(?:<\|eom_id\|>|<\|eot_id\|>)")
_BLANKS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_TRAILING = re.compile(r"[ \t]+\n")


def recover_tool_calls(text: str, tool_names: Iterable[str]) -> tuple[list[RecoveredCall], str]:
    """Find tool calls written as text; return them and the text without them.

    Calls naming a tool not in ``tool_names`` stay in the text untouched, as does anything
    whose arguments cannot be read. The remaining text has its blank runs collapsed and ends
    stripped.
    """
    known = set(tool_names)
    if not text or not known:
        return [], text
    spans: list[tuple[int, int, list[RecoveredCall]]] = []

    if "<tool_call>" in text:
        for m in _TAGGED.finditer(text):
            found = _calls_from_json(m.group(1), known)
            if found:
                spans.append((m.start(), m.end(), found))
    if "<function=" in text:
        for m in _FUNCTION.finditer(text):
            if m.group(1) in known:
                parsed = parse_tool_arguments(m.group(2))
                if parsed.value is not None:
                    spans.append(
                        (m.start(), m.end(), [RecoveredCall(m.group(1), parsed.value, m.group(0))])
                    )
    if "[TOOL_CALLS]" in text:
        for m in _MISTRAL.finditer(text):
            spans.extend(_json_after(text, m.start(), m.end(), known))
    if "<|python_tag|>" in text:
        for m in _PYTHON_TAG.finditer(text):
            spans.extend(_json_after(text, m.start(), m.end(), known))
    if "```" in text:
        for m in _FENCED.finditer(text):
            found = _calls_from_json(m.group(1), known)
            if found:
                spans.append((m.start(), m.end(), found))

    if not spans:
        return [], text
    spans.sort(key=lambda s: s[0])
    recovered: list[RecoveredCall] = []
    pieces: list[str] = []
    cursor = 0
    for start, end, found_here in spans:
        if start < cursor:  # overlapping match (a fence inside a tag): the outer one won
            continue
        _append(pieces, text[cursor:start])
        if len(found_here) == 1:
            found_here = [replace(found_here[0], raw=text[start:end])]
        recovered.extend(found_here)
        cursor = end
    _append(pieces, text[cursor:])
    return recovered, _tidy("".join(pieces))


def _json_after(
    text: str, marker_start: int, json_start: int, known: set[str]
) -> list[tuple[int, int, list[RecoveredCall]]]:
    """Calls in the JSON right after a marker: one value, several split by ``;``, or
    Mistral's newer ``name[ARGS]{...}`` form."""
    found: list[RecoveredCall] = []
    pos = json_start
    args_form = _ARGS_FORM.match(text, pos)
    if args_form is not None:
        end = find_json_end(text, args_form.end())
        if end is None or args_form.group(1) not in known:
            return []
        parsed = parse_tool_arguments(text[args_form.end() : end])
        if parsed.value is None:
            return []
        found.append(RecoveredCall(args_form.group(1), parsed.value, text[marker_start:end]))
        pos = end
    else:
        while pos < len(text) and text[pos] in "{[":
            end = find_json_end(text, pos)
            if end is None:
                return []
            calls = _calls_from_json(text[pos:end], known)
            if not calls:
                return []
            found.extend(calls)
            pos = end
            sep = _SEMICOLON.match(text, pos)
            if sep is None or sep.end() >= len(text) or text[sep.end()] not in "{[":
                break
            pos = sep.end()
    if not found:
        return []
    tail = _END_TOKENS.match(text, pos)
    if tail is not None:
        pos = tail.end()
    return [(marker_start, pos, found)]


def _calls_from_json(body: str, known: set[str]) -> list[RecoveredCall]:
    """Calls described by ``body`` when every one of them names a known tool; else none."""
    body = body.strip()
    if body.startswith("```"):  # a fence inside a tag
        fenced = _FENCED.match(body)
        body = fenced.group(1).strip() if fenced else body
    if not body or body[0] not in "{[":
        return []
    try:
        data: Any = json.loads(body, strict=False)
    except ValueError:
        end = find_json_end(body, 0)
        if end is None:
            return []
        parsed = parse_tool_arguments(body[:end]) if body[0] == "{" else None
        if parsed is not None:
            data = parsed.value
        else:
            data = json_repair.loads(body[:end])
    items = data if isinstance(data, list) else [data]
    calls: list[RecoveredCall] = []
    for item in items:
        call = _one_call(item, known, body)
        if call is None:
            return []
        calls.append(call)
    return calls


def _one_call(item: Any, known: set[str], raw: str) -> RecoveredCall | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or name not in known:
        return None
    args: Any = item.get("arguments", item.get("parameters", {}))
    if args is None:
        args = {}
    if isinstance(args, str):
        parsed = parse_tool_arguments(args)
        if parsed.value is None:
            return None
        args = parsed.value
    if not isinstance(args, dict):
        return None
    return RecoveredCall(name, args, raw)


def _append(pieces: list[str], piece: str) -> None:
    """Join around a removed call without leaving a doubled space inside the line."""
    if pieces and pieces[-1].endswith((" ", "\t")) and piece.startswith((" ", "\t")):
        piece = piece.lstrip(" \t")
    pieces.append(piece)


def _tidy(text: str) -> str:
    text = _TRAILING.sub("\n", text)
    text = _BLANKS.sub("\n\n", text)
    return text.strip()
