"""Running an experiment: every case of some datasets against a runtime, scored.

Each case runs as a real turn on a thread of its own (history seeded, files written), with
the model or system prompt overridden for a variant when asked; a captured case replays from
its cassette. Cases run ``concurrency`` at a time, each ``repeats`` times. A case that cannot
run (a broken case, an unknown agent or scorer) and a scorer that raises fail that case with
a message naming the file and the case; the other cases run on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.steps import load_execution
from ..engine.tools import recorded_results
from ..exceptions import StandardAgentsError
from ..records import Message, ToolCall, new_id, now_ms
from .datasets import Case, Dataset
from .replay import REPLAY_MODEL, ToolCassette, install_replay_model, replies
from .scorers import Observation, Score, Scorer, scorers_for

__all__ = ["CaseResult", "RunOptions", "run_case", "run_experiment"]


@dataclass
class RunOptions:
    """How an experiment runs: ``model`` / ``system`` replace the agent's for every case (a
    variant to compare); ``label`` names the run in listings."""

    concurrency: int = 4
    repeats: int = 1
    model: str | None = None
    system: str | None = None
    label: str | None = None
    project: str | Path | None = None


@dataclass
class CaseResult:
    """One run of one case."""

    dataset: str
    name: str
    repeat: int
    passed: bool
    scores: list[Score] = field(default_factory=list)
    error: str | None = None
    reply: str | None = None
    tokens: int = 0
    cost: float | None = None
    latency_ms: float = 0.0
    #: the runner's own time around the turn (seeding, reading the record, scoring), ms
    overhead_ms: float = 0.0
    execution_id: str | None = None
    thread_id: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    unmatched_calls: list[dict[str, Any]] = field(default_factory=list)
    input: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "name": self.name, "repeat": self.repeat, "passed": self.passed,
                "error": self.error, "scores": [s.to_dict() for s in self.scores], "reply": self.reply,
                "tokens": self.tokens, "cost": self.cost, "latencyMs": round(self.latency_ms, 3),
                "overheadMs": round(self.overhead_ms, 3), "executionId": self.execution_id,
                "threadId": self.thread_id, "toolCalls": self.tool_calls, "unmatchedCalls": self.unmatched_calls,
                "input": self.input}


def _where(dataset: Dataset, case: Case) -> str:
    return f"{dataset.source_file or 'dataset ' + dataset.name}: case {case.name}"


async def _seed(rt: Any, thread_id: str, case: Case) -> None:
    for h in case.input.history:
        calls = None
        if h.tool_calls:
            calls = [ToolCall(id=str(c.get("id")), name=str((c.get("function") or c).get("name")),
                              arguments=str((c.get("function") or c).get("arguments") or "{}")) for c in h.tool_calls]
        await rt.store.add_message(Message(thread_id=thread_id, role=h.role, content=h.content, tool_calls=calls,
                                           tool_call_id=h.tool_call_id, name=h.name))
    for path, text in case.input.files.items():
        await rt.store.write_file(thread_id, path, text.encode("utf-8"))


def _tool_calls(detail: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for step in detail.get("steps") or ():
        for call in step.get("toolCalls") or ():
            args = call.get("arguments")
            try:
                args = json.loads(args) if isinstance(args, str) else args
            except ValueError:
                pass
            out.append({"name": call.get("name"), "arguments": args, "status": call.get("status"),
                        "result": call.get("result"), "error": call.get("error")})
    return out


def _guardrails(detail: dict[str, Any]) -> list[dict[str, Any]]:
    found = [s["guardrail"] for s in detail.get("steps") or () if s.get("guardrail")]
    for entry in [*(g for s in detail.get("steps") or () for g in s.get("guardrails") or ()),
                  *((detail.get("checks") or {}).get("guardrails") or ())]:
        if entry.get("tripped") and not any(f.get("guardrail") == entry.get("name") for f in found):
            found.append({"guardrail": entry.get("name"), "kind": entry.get("kind")})
    return found


async def _score_all(scorers: Sequence[Scorer], obs: Observation, where: str) -> list[Score]:
    async def one(s: Scorer) -> Score:
        name = getattr(s, "name", "scorer")
        try:
            return await s.score(obs)
        except Exception as exc:  # a broken scorer fails its case, with what it raised and where
            return Score(name, 0.0, False, f"{where}: scorer {name} raised {type(exc).__name__}: {exc}")

    return list(await asyncio.gather(*(one(s) for s in scorers)))


async def run_case(rt: Any, dataset: Dataset, case: Case, options: RunOptions, repeat: int = 0,
                   extra_scorers: Sequence[Scorer] = ()) -> CaseResult:
    """Run one case once and score it; never raises for a problem of the case."""
    result = CaseResult(dataset.name, case.name, repeat, False, input=case.input.message)
    if case.error:
        result.error = case.error
        return result
    began = time.perf_counter()
    try:
        scorers: list[Scorer] = [*extra_scorers]
        for expect in (dataset.expect, case.expect):
            scorers.extend(scorers_for(expect, options.project))
        agent = case.agent or dataset.agent
        await rt.agent(agent)
        thread = await rt.create_thread(agent, metadata=case.input.metadata or None)
        result.thread_id = thread.id
        await _seed(rt, thread.id, case)
    except StandardAgentsError as exc:
        result.error = f"{_where(dataset, case)}: {exc}"
        return result
    replay = case.replay
    cassette: ToolCassette | None = None
    model = options.model
    token_tools = token_replies = None
    if replay is not None:
        cassette = ToolCassette(list(replay.tools), replay.unmatched)
        token_tools = recorded_results.set(cassette)
        if replay.offline and replay.model:
            install_replay_model(rt)
            model = REPLAY_MODEL
            token_replies = replies.set([dict(r) for r in replay.model])
    started = time.perf_counter()
    try:
        outcome = await rt.send(thread.id, case.input.message, model=model, system=options.system)
    except StandardAgentsError as exc:
        result.error = f"{_where(dataset, case)}: {exc}"
        return result
    finally:
        result.latency_ms = (time.perf_counter() - started) * 1000
        if token_tools is not None:
            recorded_results.reset(token_tools)
        if token_replies is not None:
            replies.reset(token_replies)
    result.execution_id = outcome.execution_id
    result.reply = outcome.text
    result.tokens = int(outcome.usage.get("total_tokens") or 0)
    result.cost = outcome.cost
    record = await rt.store.get_execution(outcome.execution_id)
    detail = await load_execution(rt.store, record) if record is not None else {}
    result.tool_calls = _tool_calls(detail)
    obs = Observation(input=case.input.message, text=outcome.text, value=outcome.value, reference=case.reference,
                      tool_calls=result.tool_calls, usage=dict(outcome.usage), cost=outcome.cost,
                      latency_ms=result.latency_ms, outcome=outcome.outcome, stop_reason=outcome.stop_reason,
                      error=outcome.error, guardrails=_guardrails(detail), execution_id=outcome.execution_id,
                      thread_id=thread.id, runtime=rt)
    if cassette is not None:
        result.unmatched_calls = obs.unmatched_calls = cassette.misses
    result.scores = await _score_all(scorers, obs, _where(dataset, case))
    if cassette is not None and replay is not None:
        result.scores.append(_replay_score(cassette, replay.unmatched))
    if outcome.error and outcome.stop_reason == "error":
        result.error = f"{_where(dataset, case)}: the turn failed: {outcome.error}"
    result.passed = result.error is None and all(s.passed for s in result.scores)
    result.overhead_ms = max(0.0, (time.perf_counter() - began) * 1000 - result.latency_ms)
    return result


def _replay_score(cassette: ToolCassette, unmatched: str) -> Score:
    if not cassette.misses:
        return Score("replay", 1.0, True, "every tool call matched a recorded call")
    changed = "; ".join(
        f"{m['tool']} arguments changed: {json.dumps(m['arguments'], sort_keys=True)} (recorded "
        f"{json.dumps(m['recorded'], sort_keys=True)})" if m["recorded"] is not None
        else f"{m['tool']} was not called in the recorded turn" for m in cassette.misses)
    return Score("replay", 0.0, unmatched != "fail", changed)


async def run_experiment(rt: Any, datasets: Sequence[Dataset], options: RunOptions | None = None, *,
                         on_case: Callable[[CaseResult], None] | None = None,
                         scorers: Sequence[Scorer] = ()) -> dict[str, Any]:
    """Run every case of ``datasets`` and return the experiment's report (a JSON-ready dict:
    ``passed``, ``failed``, ``cases`` with each case's scores, tokens, cost and latency).
    ``on_case`` is called as each case finishes (a progress display)."""
    options = options or RunOptions()
    started_at = now_ms()
    began = time.perf_counter()
    gate = asyncio.Semaphore(max(1, options.concurrency))
    jobs = [(d, c, r) for d in datasets for c in d.cases for r in range(max(1, options.repeats))]

    async def one(d: Dataset, c: Case, r: int) -> CaseResult:
        async with gate:
            res = await run_case(rt, d, c, options, r, scorers)
        if on_case is not None:
            on_case(res)
        return res

    results = await asyncio.gather(*(one(d, c, r) for d, c, r in jobs))
    elapsed = time.perf_counter() - began
    cases = [r.to_dict() for r in results]
    costs = [r.cost for r in results if r.cost is not None]
    passed = sum(1 for r in results if r.passed)
    return {
        "id": new_id("evrun_"), "label": options.label, "startedAt": started_at, "finishedAt": now_ms(),
        "datasets": [{"name": d.name, "agent": d.agent, "file": d.source_file, "cases": len(d.cases)} for d in datasets],
        "options": {"concurrency": options.concurrency, "repeats": options.repeats, "model": options.model,
                    "system": options.system},
        "passed": passed, "failed": len(results) - passed,
        "summary": {"cases": len(results), "tokens": sum(r.tokens for r in results),
                    "cost": sum(costs) if costs else None, "durationMs": round(elapsed * 1000, 3),
                    "casesPerSecond": round(len(results) / elapsed, 3) if elapsed > 0 else None,
                    "scorerCost": sum(s.cost or 0.0 for r in results for s in r.scores) or None},
        "cases": cases,
    }
