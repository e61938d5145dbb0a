"""Keeping a long run inside its context window.

Two tools, cheapest first: :func:`prune_tool_results` blanks stale tool output (usually the
bulk of a long run) without losing the call/result pairing endpoints insist on; when that is
not enough, :func:`plan_compaction` picks the oldest stretch to fold and
:func:`compact_transcript` replaces it with one summary message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import RuntimeFailure
from ._tokens import estimate_tokens

__all__ = [
    "PRUNED_PLACEHOLDER",
    "SUMMARY_PREFIX",
    "CompactionPlan",
    "compact_transcript",
    "is_summary_message",
    "plan_compaction",
    "prune_tool_results",
]

PRUNED_PLACEHOLDER = "[tool result cleared to save context; call the tool again if needed]"
SUMMARY_PREFIX = "[Summary of the earlier conversation, which was folded to save context]"

Message = dict[str, Any]
Summarizer = Callable[[list[Message]], Awaitable[str]]


def prune_tool_results(
    messages: Sequence[Message], keep_last: int = 4, placeholder: str = PRUNED_PLACEHOLDER
) -> list[Message]:
    """A copy of ``messages`` where tool results older than the last ``keep_last`` are blanked.

    Each pruned result keeps its message and ``tool_call_id`` with ``placeholder`` as content,
    so every call still has its answer. Messages not changed are the same objects.
    """
    positions = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    stale = set(positions[: max(0, len(positions) - max(0, keep_last))])
    out: list[Message] = []
    for i, message in enumerate(messages):
        if i in stale and message.get("content") != placeholder:
            out.append({**message, "content": placeholder})
        else:
            out.append(message)
    return out


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Fold ``messages[start:end]`` into a summary.

    ``tokens_before`` is the transcript's estimate, ``folded_tokens`` what the stretch counts
    and ``kept_tokens`` what stays around it.
    """

    start: int
    end: int
    tokens_before: int
    folded_tokens: int
    kept_tokens: int

    @property
    def count(self) -> int:
        """How many messages are folded."""
        return self.end - self.start


def _units(messages: Sequence[Message], start: int) -> list[tuple[int, int]]:
    """``[start, end)`` spans that must stay together: an assistant call with its results."""
    units: list[tuple[int, int]] = []
    i = start
    n = len(messages)
    while i < n:
        j = i + 1
        if messages[i].get("role") == "assistant" and messages[i].get("tool_calls"):
            while j < n and messages[j].get("role") == "tool":
                j += 1
        else:
            while j < n and messages[j].get("role") == "tool":  # orphan results stick to the left
                j += 1
        units.append((i, j))
        i = j
    return units


def plan_compaction(
    messages: Sequence[Message],
    window: int,
    reserve: int,
    *,
    summary_allowance: int | None = None,
) -> CompactionPlan | None:
    """Which oldest stretch to fold, or ``None`` when the transcript fits ``window - reserve``.

    Leading system messages are never folded, an assistant tool call is never separated from
    its results, and the most recent messages that fit the budget (less ``summary_allowance``
    tokens for the summary, by default a quarter of the budget up to 1024) are kept. The
    newest exchange is always kept, so the plan may still exceed the budget when that
    exchange alone does.
    """
    per_message = [estimate_tokens(m) for m in messages]
    total = sum(per_message)
    budget = window - reserve
    if total <= budget:
        return None
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    units = _units(messages, head)
    if len(units) < 2:
        return None
    allowance = min(1024, max(0, budget) // 4) if summary_allowance is None else summary_allowance
    room = budget - sum(per_message[:head]) - allowance
    first_kept = len(units) - 1
    kept = sum(per_message[units[-1][0] : units[-1][1]])
    for index in range(len(units) - 2, -1, -1):
        size = sum(per_message[units[index][0] : units[index][1]])
        if kept + size > room:
            break
        kept += size
        first_kept = index
    if first_kept == 0:
        return None
    end = units[first_kept][0]
    folded = sum(per_message[head:end])
    return CompactionPlan(head, end, total, folded, total - folded)


def is_summary_message(message: Message) -> bool:
    """True for a message :func:`compact_transcript` inserted."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(SUMMARY_PREFIX)


async def compact_transcript(
    messages: Sequence[Message], plan: CompactionPlan, summarize: Summarizer
) -> list[Message]:
    """The transcript with ``plan``'s stretch replaced by one summary message.

    ``summarize`` receives the folded messages and returns the summary text. The summary is
    a ``user`` message starting with :data:`SUMMARY_PREFIX` (endpoints accept a user message
    anywhere; many refuse a second system message).
    """
    if not 0 <= plan.start < plan.end <= len(messages):
        raise RuntimeFailure(
            f"compaction plan [{plan.start}:{plan.end}] does not fit a transcript of "
            f"{len(messages)} messages; plan again for this transcript"
        )
    folded = list(messages[plan.start : plan.end])
    summary = await summarize(folded)
    if not isinstance(summary, str) or not summary.strip():
        raise RuntimeFailure("the summarizer returned no text; nothing was folded")
    message: Message = {"role": "user", "content": f"{SUMMARY_PREFIX}\n{summary.strip()}"}
    return [*messages[: plan.start], message, *messages[plan.end :]]
