"""Median cost of each toolcalls pass on a realistic model step, in microseconds.

Run: ``.venv/bin/python benchmarks/toolcall_passes.py [repetitions]``. Each pass is timed
with ``time.perf_counter_ns`` over many repetitions and the median is printed, so one slow
outlier (a GC pause) does not move the figure.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from standardagents.toolcalls import (
    FenceSplitter,
    estimate_tokens,
    parse_tool_arguments,
    recover_tool_calls,
    sanitize_tools,
)

VALID_ARGS = json.dumps(
    {
        "path": "src/app/main.py",
        "content": "def main():\n    print('hello')\n" * 20,
        "overwrite": True,
        "tags": ["a", "b", "c"],
    }
)
BROKEN_ARGS = "```json\n{'path': 'src/app/main.py', 'overwrite': True, 'tags': ['a', 'b',],}\n```"
SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "overwrite": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
REPLY = (
    "I looked at the repository and the failing test comes from the date parser. "
    "The fix is to accept a trailing Z in ISO timestamps; I have updated the function "
    "and added a test for it. Let me know if you want me to run the whole suite.\n"
) * 6
TOOL_NAMES = [f"tool_{i}" for i in range(20)]


def make_tools() -> list[dict[str, Any]]:
    tools = []
    for i in range(20):
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": f"tool_{i}",
                    "description": f"Tool number {i}.",
                    "parameters": {
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "type": "object",
                        "properties": {
                            "query": {"type": "string", "minLength": 1, "examples": ["x"]},
                            "limit": {"type": "integer", "default": 10, "minimum": 1},
                            "since": {
                                "anyOf": [
                                    {"type": "string", "format": "date-time"},
                                    {"type": "null"},
                                ]
                            },
                            "filter": {"$ref": "#/$defs/Filter"},
                        },
                        "required": ["query"],
                        "$defs": {
                            "Filter": {
                                "type": "object",
                                "properties": {
                                    "field": {"type": "string"},
                                    "value": {"type": "string"},
                                },
                            }
                        },
                    },
                },
            }
        )
    return tools


def make_history() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful. " * 50}]
    while len(messages) < 40:
        n = len(messages)
        messages.append({"role": "user", "content": f"Please look at file {n} and fix it. " * 5})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {"name": "read", "arguments": VALID_ARGS},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "line of code\n" * 80})
        messages.append({"role": "assistant", "content": REPLY[:400]})
    return messages[:40]


def make_stream() -> list[str]:
    reply = "<think>" + "Let me reason about the request step by step. " * 20 + "</think>" + REPLY
    return [reply[i : i + 7] for i in range(0, len(reply), 7)]


def split_stream(chunks: list[str]) -> None:
    splitter = FenceSplitter()
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.flush()


def median_us(fn: Callable[[], object], repetitions: int) -> float:
    for _ in range(min(50, repetitions)):
        fn()
    samples = []
    for _ in range(repetitions):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main() -> None:
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    tools = make_tools()
    history = make_history()
    chunks = make_stream()
    passes: list[tuple[str, Callable[[], object]]] = [
        ("parse valid arguments", lambda: parse_tool_arguments(VALID_ARGS)),
        ("parse valid arguments with schema", lambda: parse_tool_arguments(VALID_ARGS, SCHEMA)),
        ("parse broken arguments", lambda: parse_tool_arguments(BROKEN_ARGS)),
        ("recover calls from text with none", lambda: recover_tool_calls(REPLY, TOOL_NAMES)),
        ("sanitize 20 tools", lambda: sanitize_tools(tools)),
        ("estimate tokens of 40 messages", lambda: estimate_tokens(history)),
        (f"FenceSplitter over {len(chunks)} streamed chunks", lambda: split_stream(chunks)),
    ]
    width = max(len(name) for name, _ in passes)
    print(f"median of {repetitions} repetitions, microseconds")
    for name, fn in passes:
        print(f"{name:<{width}}  {median_us(fn, repetitions):10.1f}")


if __name__ == "__main__":
    main()
