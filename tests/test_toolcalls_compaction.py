"""estimate_tokens, prune_tool_results, plan_compaction and compact_transcript."""

from __future__ import annotations

from typing import Any

import pytest

from standardagents.exceptions import RuntimeFailure
from standardagents.toolcalls import (
    MESSAGE_OVERHEAD,
    PRUNED_PLACEHOLDER,
    CompactionPlan,
    compact_transcript,
    estimate_tokens,
    is_summary_message,
    plan_compaction,
    prune_tool_results,
)


def call(cid: str, name: str = "f", args: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def history(turns: int, size: int = 400) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "S" * 40}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"u{i} " + "x" * size})
        messages.append(
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}a"), call(f"c{i}b")]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}a", "content": "r" * size})
        messages.append({"role": "tool", "tool_call_id": f"c{i}b", "content": "r" * size})
        messages.append({"role": "assistant", "content": f"a{i} " + "y" * size})
    return messages


@pytest.mark.parametrize(
    ("text", "expected"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)]
)
def test_estimate_text_is_chars_over_four_rounded_up(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_estimate_message_counts_content_calls_and_overhead() -> None:
    message = {"role": "assistant", "content": "abcd", "tool_calls": [call("1", "fn", '{"a":1}')]}
    assert estimate_tokens(message) == -(-(4 + 2 + 7) // 4) + MESSAGE_OVERHEAD


def test_estimate_reads_text_parts() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "x" * 8},
            {"type": "image_url", "image_url": {"url": "u"}},
        ],
    }
    assert estimate_tokens(message) == 2 + MESSAGE_OVERHEAD


def test_estimate_of_a_list_is_the_sum() -> None:
    messages = history(3)
    assert estimate_tokens(messages) == sum(estimate_tokens(m) for m in messages)


def test_prune_clears_older_tool_results_only() -> None:
    messages = history(3)
    pruned = prune_tool_results(messages, keep_last=2)
    tool_contents = [m["content"] for m in pruned if m["role"] == "tool"]
    assert tool_contents[:4] == [PRUNED_PLACEHOLDER] * 4
    assert tool_contents[4:] == ["r" * 400, "r" * 400]


def test_prune_keeps_every_call_answered() -> None:
    messages = history(3)
    pruned = prune_tool_results(messages, keep_last=0)
    assert len(pruned) == len(messages)
    ids = [m["tool_call_id"] for m in pruned if m["role"] == "tool"]
    assert ids == [m["tool_call_id"] for m in messages if m["role"] == "tool"]


def test_prune_does_not_modify_its_input() -> None:
    messages = history(2)
    prune_tool_results(messages, keep_last=0)
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["r" * 400] * 4


def test_plan_is_none_when_the_transcript_fits() -> None:
    assert plan_compaction(history(2), window=100_000, reserve=1000) is None


def test_plan_folds_the_oldest_stretch_after_the_system_message() -> None:
    messages = history(10)
    plan = plan_compaction(messages, window=1500, reserve=200)
    assert plan is not None
    assert plan.start == 1
    assert messages[plan.end]["role"] != "tool"
    assert plan.kept_tokens <= 1500 - 200
    assert plan.tokens_before == estimate_tokens(messages)
    assert plan.folded_tokens + plan.kept_tokens == plan.tokens_before


def test_plan_never_separates_a_call_from_its_results() -> None:
    messages = history(10)
    for window in range(400, 3000, 37):
        plan = plan_compaction(messages, window=window, reserve=100)
        if plan is None:
            continue
        first_kept = messages[plan.end]
        assert first_kept["role"] != "tool"


def test_plan_keeps_the_newest_exchange_even_when_it_alone_is_too_big() -> None:
    messages = history(3, size=4000)
    plan = plan_compaction(messages, window=500, reserve=100)
    assert plan is not None
    assert plan.end == len(messages) - 1


def test_plan_is_none_when_nothing_can_be_folded() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "x" * 10_000}]
    assert plan_compaction(messages, window=100, reserve=10) is None


async def test_compact_replaces_the_stretch_with_a_summary() -> None:
    messages = history(10)
    plan = plan_compaction(messages, window=1500, reserve=200)
    assert plan is not None
    seen: list[list[dict[str, Any]]] = []

    async def summarize(folded: list[dict[str, Any]]) -> str:
        seen.append(folded)
        return f"{len(folded)} messages about x and y"

    out = await compact_transcript(messages, plan, summarize)
    assert seen == [messages[plan.start : plan.end]]
    assert out[0] == messages[0]
    assert is_summary_message(out[1])
    assert out[1]["role"] == "user"
    assert f"{plan.count} messages about x and y" in out[1]["content"]
    assert out[2:] == messages[plan.end :]
    assert estimate_tokens(out) < estimate_tokens(messages)


async def test_compact_rejects_a_plan_for_another_transcript() -> None:
    async def summarize(folded: list[dict[str, Any]]) -> str:
        return "s"

    with pytest.raises(RuntimeFailure, match="plan again"):
        await compact_transcript(history(1), CompactionPlan(1, 50, 0, 0, 0), summarize)


async def test_compact_refuses_an_empty_summary() -> None:
    async def summarize(folded: list[dict[str, Any]]) -> str:
        return "  "

    with pytest.raises(RuntimeFailure, match="no text"):
        await compact_transcript(history(2), CompactionPlan(1, 3, 0, 0, 0), summarize)
