"""Online evaluation: scorers attached to an agent judge a sample of its production turns.

Scoring starts after the turn's ``done`` was sent, as a background task (the turn-end hook
only draws the sample), so a turn is never slower for being scored. Scores are stored with
the execution (``source: online``), counted in ``/metrics``
(``standardagents_eval_scores{agent,scorer,result}``) and, when tracing is on, recorded as a
span with one event per score, tagged with the turn's execution and trace ids.

Rules come from code (:func:`attach_online`) or a project's ``evals/online.yaml``::

    - agent: assistant
      rate: 0.1
      expect: {contains: "84", max_latency_ms: 2000}
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..records import ExecutionRecord
from .datasets import DatasetError, Expect
from .scorers import Observation, Scorer, as_scorer, scorers_for

__all__ = ["ONLINE_FILE", "OnlineRule", "OnlineScoring", "attach_online", "load_online_rules", "start_online"]

log = logging.getLogger("standardagents.evals.online")

#: the project file holding online rules (never read as a dataset)
ONLINE_FILE = "online.yaml"


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    agent: str
    rate: float = Field(default=0.1, ge=0, le=1)
    expect: Expect = Field(default_factory=Expect)


@dataclass
class OnlineRule:
    """Score ``rate`` of ``agent``'s turns with ``scorers``."""

    agent: str
    scorers: list[Scorer]
    rate: float = 0.1


@dataclass
class OnlineScoring:
    """The rules attached to one runtime, and the scoring tasks in flight."""

    rt: Any
    rules: list[OnlineRule]
    rng: random.Random = field(default_factory=random.Random)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    scored: int = 0

    def __post_init__(self) -> None:
        self.top_rate = max((r.rate for r in self.rules), default=0.0)

    async def _turn_ended(self, record: ExecutionRecord, data: dict[str, Any]) -> None:
        # the only work on the turn's task: one draw (the thread is read in the background)
        if self.rng.random() >= self.top_rate:
            return
        task = asyncio.get_running_loop().create_task(self._score(record))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _score(self, record: ExecutionRecord) -> None:
        try:
            await self.score_execution(record, sampled=True)
        except Exception:
            log.warning("online scoring of execution %s failed", record.id, exc_info=True)

    async def score_execution(self, record: ExecutionRecord, *, sampled: bool = False) -> list[dict[str, Any]]:
        """Score one ended execution with its agent's rules and store the scores; returns them."""
        from ..engine.steps import load_execution
        from .runner import _guardrails, _tool_calls
        from .scorers import Score
        from .storage import save_scores

        store = self.rt.store
        thread = await store.get_thread(record.thread_id)
        if thread is None:
            return []
        rules = [r for r in self.rules if r.agent == thread.agent]
        if sampled:  # drawn against the highest rate: keep each rule's own share
            rules = [r for r in rules if self.top_rate and self.rng.random() < r.rate / self.top_rate]
        if not rules:
            return []
        detail = await load_execution(store, record)
        messages = await store.list_messages(record.thread_id)
        first = next((i for i, m in enumerate(messages) if (m.metadata or {}).get("executionId") == record.id), None)
        asked = next((m.content or "" for m in reversed(messages[:first]) if m.role == "user"), "") if first else ""
        replies = [m for m in messages if (m.metadata or {}).get("executionId") == record.id and m.role == "assistant"]
        state = record.state or {}
        obs = Observation(input=asked, text=replies[-1].content if replies else None, value=state.get("value"),
                          tool_calls=_tool_calls(detail), usage=dict(state.get("usage") or {}),
                          cost=state.get("cost"), latency_ms=float(max(0, record.updated_at - record.created_at)),
                          outcome=state.get("outcome"), stop_reason=record.stop_reason, error=record.error,
                          guardrails=_guardrails(detail), execution_id=record.id, thread_id=record.thread_id,
                          runtime=self.rt)
        scores: list[Score] = []
        for rule in rules:
            for s in rule.scorers:
                try:
                    scores.append(await s.score(obs))
                except Exception as exc:  # stored as a failed score: the other scorers still run
                    name = getattr(s, "name", "scorer")
                    scores.append(Score(name, 0.0, False, f"scorer {name} raised {type(exc).__name__}: {exc}"))
        rows = [s.to_dict() for s in scores]
        await save_scores(store, record.id, rows, source="online")
        self.scored += 1
        _count(thread.agent, scores)
        _trace(record, detail.get("traceId"), scores)
        return rows

    async def drain(self) -> None:
        """Wait for the scoring tasks in flight."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def detach(self) -> None:
        """Stop sampling new turns and finish those being scored."""
        if self._turn_ended in self.rt.turn_end_hooks:
            self.rt.turn_end_hooks.remove(self._turn_ended)
        await self.drain()


def attach_online(rt: Any, rules: Sequence[OnlineRule], *, seed: int | None = None) -> OnlineScoring:
    """Score a sample of the runtime's turns from now on (see :class:`OnlineRule`)."""
    for rule in rules:
        rule.scorers = [as_scorer(s) for s in rule.scorers]
    scoring = OnlineScoring(rt, list(rules), random.Random(seed))
    rt.turn_end_hooks.append(scoring._turn_ended)
    return scoring


def load_online_rules(project: str | Path) -> list[OnlineRule]:
    """The rules of a project's ``evals/online.yaml`` (none when it has no such file)."""
    path = Path(project) / "evals" / ONLINE_FILE
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DatasetError(f"not valid YAML: {exc}", source=str(path)) from None
    if not isinstance(data, list):
        raise DatasetError("a list of rules (agent, rate, expect)", source=str(path))
    rules = []
    for index, raw in enumerate(data):
        try:
            rule = _RuleModel.model_validate(raw)
        except ValidationError as exc:
            problems = [(f"rule {index + 1}: " + ".".join(str(p) for p in e["loc"]),
                         str(e["msg"]).removeprefix("Value error, ")) for e in exc.errors()]
            raise DatasetError(problems, source=str(path)) from None
        rules.append(OnlineRule(rule.agent, scorers_for(rule.expect, project), rule.rate))
    return rules


_instruments: dict[int, Any] = {}


def _count(agent: str, scores: list[Any]) -> None:
    from ..observability import metrics

    meter = metrics.active()
    if meter is None:
        return
    counter = _instruments.get(id(meter))
    if counter is None:
        from prometheus_client import Counter

        counter = _instruments[id(meter)] = Counter(
            "standardagents_eval_scores", "Online eval scores, by agent, scorer and result (pass, fail).",
            ["agent", "scorer", "result"], registry=meter.registry)
    for s in scores:
        counter.labels(agent, s.name, "pass" if s.passed else "fail").inc()


def _trace(record: ExecutionRecord, trace_id: str | None, scores: list[Any]) -> None:
    from ..observability.tracing import tracer

    found = tracer()
    if found is None:
        return
    with found.start_as_current_span("standardagents.eval.online") as span:
        span.set_attribute("standardagents.execution_id", record.id)
        span.set_attribute("standardagents.thread_id", record.thread_id)
        if trace_id:
            span.set_attribute("standardagents.turn_trace_id", trace_id)
        for s in scores:
            span.add_event("eval.score", {"scorer": s.name, "score": s.score, "passed": s.passed,
                                          "reason": s.reason[:500]})


def start_online(rt: Any) -> OnlineScoring | None:
    """Attach the rules of the runtime's project file ``evals/online.yaml`` (a server calls
    this as it starts); None when there are none. A broken file is logged, never fatal."""
    root = getattr(rt.registry, "root", None)
    if root is None:
        return None
    try:
        rules = load_online_rules(root)
    except Exception as exc:
        log.error("online scoring is off: %s", exc)
        return None
    return attach_online(rt, rules) if rules else None
