"""What a turn reads of its thread's history: the part a model context can hold, not all of it.

Compaction hides the messages it folds into a summary; nothing before a thread's oldest
message that is not hidden can reach a model again. A turn therefore reads from there on
(:meth:`Store.list_context_messages`, bounded by an index), so its cost follows the context,
not the thread's length. The read happens at the start of every turn, under the thread's
claim: a message another worker stored, hid or showed again before it is seen.

``execution.message_history`` is this window; :meth:`ThreadState.get_messages` still reads
the whole thread when asked. The one thing that needs the whole thread is a usage limit that
counts it (``thread_*`` limits: what earlier turns spent; a resumed turn's own limits: what its
earlier steps spent, which a compaction in the same turn may have folded): those turns read
everything, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import Message
from .compaction import place_summaries

if TYPE_CHECKING:
    from .loop import Execution

__all__ = ["turn_history"]


async def turn_history(execution: Execution, *, resumed: bool = False) -> list[Message]:
    """The history a turn starts from, with compaction summaries in their places.
    ``resumed``: the turn goes on from a pause (its earlier steps count toward its limits)."""
    store = execution.rt.store
    thread_id = execution.thread_id
    if _counts_whole_thread(execution, resumed):
        return place_summaries(await store.list_messages(thread_id))
    window = await store.list_context_messages(thread_id)
    ids = {m.id for m in window}
    earlier = [a for m in window if (a := _anchor(m)) is not None and a not in ids]
    positions = await store.message_positions(thread_id, earlier) if earlier else {}
    return place_summaries(window, positions)


def _counts_whole_thread(execution: Execution, resumed: bool) -> bool:
    own = execution.usage_limits
    agent = execution.agent.usage_limits
    limits = agent.merged(own) if agent is not None else own
    return limits is not None and (resumed or limits.any_thread_limit())


def _anchor(m: Message) -> str | None:
    """The id of the message a stored summary goes before, when ``m`` is one."""
    if not m.metadata.get("summary"):
        return None
    anchor = m.metadata.get("insertBefore")
    return anchor if isinstance(anchor, str) else None
