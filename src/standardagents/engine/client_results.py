"""Answering the client tool calls a turn paused for: the results are stored on the waiting
execution (exactly one of concurrent submitters wins) and the same execution goes on.

This is a flow above the turn's parts (it continues a turn through the runtime), kept apart
from :mod:`.client_tools`, whose types the turn's options and loop use below it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..records import new_id, now_ms
from .client_tools import WAITING_FOR, ClientToolError, forget_calls

if TYPE_CHECKING:
    from .hosts import ClientResultsHost
    from .options import TurnOptions
    from .results import ExecutionResult

__all__ = ["submit_results"]


async def submit_results(rt: ClientResultsHost, execution_id: str, results: dict[str, str],
                         options: TurnOptions | None = None) -> asyncio.Task[ExecutionResult]:
    """Answer every pending client call of a waiting execution and continue it; returns the
    continued execution's task (its id stays the same).

    ``options`` are the continuation's own (output type, sampling, client tools: the client
    may offer its tools again); the ones of the paused turn apply otherwise. A compare-and-set
    on the record makes exactly one of concurrent submitters continue the turn."""
    for _attempt in range(50):
        record = await rt.store.get_execution(execution_id)
        if record is None or record.status != "waiting" or record.state.get("waitingFor") != WAITING_FOR:
            raise ClientToolError("no turn waits for these tool results: the execution is no longer waiting")
        pending = [c["id"] for c in record.state.get("clientCalls", [])]
        missing = [c for c in pending if c not in results]
        if missing:
            raise ClientToolError(f"the results of the calls {missing} are missing: every call the turn made "
                                  "must be answered")
        unknown = sorted(set(results) - set(pending))
        if unknown:
            raise ClientToolError(f"the calls {unknown} are not pending on this turn")
        seen_at = record.updated_at
        record.state = {**record.state, "results": {k: results[k] for k in pending}, "owner": rt.owner,
                        "resumeBy": new_id("res_")}
        record.status = "running"
        record.updated_at = max(now_ms(), seen_at + 1)
        record.epoch += 1  # the turn goes on under this process's claim
        if await rt.store.replace_execution(record, expected_status="waiting", expected_updated_at=seen_at):
            break
    else:
        raise ClientToolError("the results could not be recorded: the execution kept changing; try again")
    await forget_calls(rt, record)
    thread = await rt.get_thread(record.thread_id)
    agent = await rt.agent(thread.agent, thread.package)
    return rt.inflight.track(rt.execute(thread, agent, None, record.side, resume=record, options=options), thread.id)
