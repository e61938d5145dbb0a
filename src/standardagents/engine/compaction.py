"""Automatic compaction: when a prompt's context crosses its threshold, the oldest stretch
of the conversation is folded into one summary written by a side-task model call.

The folded messages stay in the store, marked ``hidden`` (out of the model's context, still
shown to clients); the summary is stored with where it belongs (``insertBefore``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .. import observability as observe
from ..records import Message
from ..toolcalls import SUMMARY_PREFIX, ask, estimate_tokens, plan_compaction
from .context import to_llm_message

if TYPE_CHECKING:
    from .execution_core import ExecutionCore
    from .side import SideSetup

__all__ = ["compact_if_needed", "place_summaries"]

log = logging.getLogger("standardagents.compaction")

_SUMMARY_SYSTEM = ("You compress conversations. Write a faithful, dense summary of the transcript: facts, decisions, "
                   "open questions, tool results that matter, and the user's goals. No preamble.")


def _budget(setup: SideSetup) -> int | None:
    threshold = setup.prompt.compaction_threshold
    window = setup.model.context_window
    if not threshold or not window:
        return None
    return int(window * threshold)


def over_threshold(setup: SideSetup, messages: list[dict[str, Any]]) -> bool:
    budget = _budget(setup)
    return budget is not None and estimate_tokens(messages) > budget


async def compact_if_needed(execution: ExecutionCore, setup: SideSetup, system: str | None) -> bool:
    """Fold the oldest stretch when the context is over budget; True when it folded."""
    budget = _budget(setup)
    if budget is None or execution.dual:
        return False
    history = execution.ex.message_history
    visible = [m for m in history if not m.hidden]
    llm = [to_llm_message(m, None, False) or {"role": m.role, "content": ""} for m in visible]
    head = [{"role": "system", "content": system}] if system else []
    plan = plan_compaction([*head, *llm], budget, 0)
    if plan is None:
        return False
    offset = len(head)
    folded = visible[plan.start - offset: plan.end - offset]
    if not folded or plan.end - offset >= len(visible):
        return False
    transcript = "\n".join(f"{m.role}: {m.content or ''}" + (f" [calls {', '.join(c.name for c in m.tool_calls)}]" if m.tool_calls else "")
                           for m in folded)
    provider = execution.rt.provider_for(setup.model)
    summary = await ask(provider, setup.model.model, transcript, system=_SUMMARY_SYSTEM)
    if not summary.strip():
        log.warning("compaction skipped: the summary came back empty")
        return False
    first_kept = visible[plan.end - offset]
    message = Message(thread_id=execution.thread_id, role="user", content=f"{SUMMARY_PREFIX}\n{summary.strip()}",
                      metadata={"summary": True, "folded": [m.id for m in folded], "insertBefore": first_kept.id,
                                "executionId": execution.record.id, "step": execution.ex.step_count})
    updates = [(m.id, {"hidden": True}) for m in folded]
    stored = await execution.rt.store.commit_step(messages=[message], updates=updates, fence=execution.ex.fence)
    summary_msg = stored[0]
    folded_ids = {m.id for m in folded}
    rebuilt: list[Message] = []
    for m in history:
        if m.id == first_kept.id:
            rebuilt.append(summary_msg)
        rebuilt.append(m.copy(hidden=True) if m.id in folded_ids else m)
    history[:] = rebuilt
    execution.ex.history_version += 1
    execution.bus.emit("message_created", execution.thread_id, {"message": summary_msg.to_dict()})
    execution.bus.emit("compacted", execution.thread_id, {"folded": len(folded), "summaryId": summary_msg.id,
                                                          "tokensBefore": plan.tokens_before})
    observe.event("standardagents.compaction", {"standardagents.folded": len(folded),
                                                "standardagents.tokens_before": plan.tokens_before})
    return True


def place_summaries(history: list[Message], earlier: dict[str, int] | None = None) -> list[Message]:
    """Put stored summaries back where they belong: before the first message they kept (a
    summary that kept an earlier summary first goes before that one). The newest summary of
    a message wins; one whose message no longer exists stays where it was stored.

    ``earlier``: for a history that starts partway through its thread (the thread's messages
    from some position on), the stored position of each summary's anchor that lies before it;
    those summaries open the history, in the order of their anchors' positions."""
    ids = {m.id for m in history}
    before = earlier or {}
    summaries: dict[str, Message] = {}
    for m in history:
        anchor = m.metadata.get("insertBefore") if m.metadata.get("summary") else None
        if isinstance(anchor, str) and (anchor in ids or anchor in before):
            summaries[anchor] = m
    if not summaries:
        return history
    moved = {id(m) for m in summaries.values()}
    out: list[Message] = []
    done: set[int] = set()
    for anchor in sorted((a for a in summaries if a not in ids), key=before.__getitem__):
        _place(out, summaries[anchor], summaries, done)
    for m in history:
        if id(m) not in moved:
            _place(out, m, summaries, done)
    return out


def _place(out: list[Message], m: Message, summaries: dict[str, Message], done: set[int]) -> None:
    """Append ``m`` after the summary placed before it (after that one's own, and so on)."""
    chain: list[Message] = []
    placed = summaries.get(m.id)
    while placed is not None and id(placed) not in done:
        done.add(id(placed))
        chain.append(placed)
        placed = summaries.get(placed.id)
    out.extend(reversed(chain))
    out.append(m)
