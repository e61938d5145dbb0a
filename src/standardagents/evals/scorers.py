"""Scorers: what judges one case's turn, built in and user-defined.

A scorer reads an :class:`Observation` (the turn's reply, typed value, tool calls, usage,
cost, latency, guardrails) and returns a :class:`Score`: a number in [0, 1], pass or fail,
and a reason. User scorers are plain functions or classes, sync or async, returning a
number, a bool, ``(value, reason)``, a dict or a ``Score``; :func:`as_scorer` adapts them.
A scorer that raises fails its case with the error as the reason; other scorers still run.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..exceptions import StandardAgentsError
from .datasets import Expect, JudgeSpec, ScorerRef, ToolCallExpectation, ToolExpectation

__all__ = [
    "Budget",
    "Contains",
    "Equals",
    "JsonSchema",
    "LLMJudge",
    "NoGuardrail",
    "NotContains",
    "Observation",
    "OutputTypeValid",
    "Regex",
    "Score",
    "Scorer",
    "ScorerError",
    "ToolTrajectory",
    "as_scorer",
    "load_scorer",
    "scorer",
    "scorers_for",
]


class ScorerError(StandardAgentsError):
    """A scorer could not be found or built (an unknown ``module:function``)."""


@dataclass(slots=True)
class Score:
    """One scorer's judgement of one case."""

    name: str
    score: float
    passed: bool
    reason: str = ""
    threshold: float | None = None
    #: what judging cost (an LLM judge's model call), USD
    cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Observation:
    """What a case's turn produced, as scorers read it."""

    input: str
    text: str | None = None
    value: Any = None
    reference: Any = None
    output_type: Any = None
    #: each call: ``name``, ``arguments`` (a dict), ``status``, ``result``, ``error``
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    latency_ms: float = 0.0
    outcome: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    #: the guardrails that tripped in the turn (their records)
    guardrails: list[dict[str, Any]] = field(default_factory=list)
    execution_id: str | None = None
    thread_id: str | None = None
    #: a replayed case's calls that matched no recorded call (tool, arguments, closest recorded)
    unmatched_calls: list[dict[str, Any]] = field(default_factory=list)
    #: the runtime that ran the turn (an LLM judge calls its models through it)
    runtime: Any = None

    @property
    def tokens(self) -> int:
        return int(self.usage.get("total_tokens") or 0)


@runtime_checkable
class Scorer(Protocol):
    """Anything with a ``name`` and an async ``score`` of an observation."""

    name: str

    async def score(self, obs: Observation) -> Score: ...


def _texts(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@dataclass
class Contains:
    """The reply contains every one of these texts."""

    text: str | list[str]
    ignore_case: bool = False
    name: str = "contains"

    async def score(self, obs: Observation) -> Score:
        reply = obs.text or ""
        wanted = _texts(self.text)
        hay = reply.lower() if self.ignore_case else reply
        missing = [t for t in wanted if (t.lower() if self.ignore_case else t) not in hay]
        share = 1 - len(missing) / len(wanted) if wanted else 1.0
        return Score(self.name, share, not missing, f"missing {missing!r}" if missing else "all found")


@dataclass
class NotContains:
    """The reply contains none of these texts."""

    text: str | list[str]
    name: str = "not_contains"

    async def score(self, obs: Observation) -> Score:
        found = [t for t in _texts(self.text) if t in (obs.text or "")]
        return Score(self.name, 0.0 if found else 1.0, not found, f"found {found!r}" if found else "none found")


@dataclass
class Equals:
    """The reply (or the typed value, when the expectation is not text) equals this."""

    expected: Any
    name: str = "equals"

    async def score(self, obs: Observation) -> Score:
        if isinstance(self.expected, str):
            got: Any = (obs.text or "").strip()
            ok = got == self.expected.strip()
        else:
            got = _plain(obs.value)
            ok = got == self.expected
        return Score(self.name, 1.0 if ok else 0.0, ok, "equal" if ok else f"got {got!r}, expected {self.expected!r}")


@dataclass
class Regex:
    """The reply matches this regular expression (searched anywhere)."""

    pattern: str
    name: str = "regex"

    async def score(self, obs: Observation) -> Score:
        ok = re.search(self.pattern, obs.text or "") is not None
        return Score(self.name, 1.0 if ok else 0.0, ok, "matched" if ok else f"no match for /{self.pattern}/")


@dataclass
class ToolTrajectory:
    """The turn called these tools (with these arguments, a subset), in this order or any."""

    expected: ToolExpectation
    name: str = "tools"

    async def score(self, obs: Observation) -> Score:
        calls = obs.tool_calls
        want = self.expected.calls
        used: set[int] = set()
        position = 0
        found = 0
        problems: list[str] = []
        for item in want:
            start = position if self.expected.order == "strict" else 0
            hit = next((i for i in range(start, len(calls)) if i not in used and calls[i]["name"] == item.name
                        and _subset(item.arguments, calls[i].get("arguments"))), None)
            if hit is None:
                same = [c for c in calls if c["name"] == item.name]
                if same and item.arguments is not None:
                    problems.append(f"{item.name} called with {same[0].get('arguments')!r}, expected {item.arguments!r}")
                else:
                    problems.append(f"{item.name} not called" + (" in order" if same else ""))
                continue
            used.add(hit)
            position = hit + 1
            found += 1
        if self.expected.exact and len(calls) != len(want):
            problems.append(f"{len(calls)} calls made, {len(want)} expected: {[c['name'] for c in calls]}")
        share = found / len(want) if want else (1.0 if not calls or not self.expected.exact else 0.0)
        ok = not problems
        return Score(self.name, share if not (self.expected.exact and len(calls) != len(want)) else min(share, 0.5),
                     ok, "; ".join(problems) or f"called {[c['name'] for c in calls]}")


def _subset(expected: dict[str, Any] | None, got: Any) -> bool:
    if expected is None:
        return True
    return isinstance(got, dict) and all(k in got and got[k] == v for k, v in expected.items())


@dataclass
class JsonSchema:
    """The reply (or typed value) is valid against this JSON Schema."""

    schema: dict[str, Any]
    name: str = "json_schema"

    async def score(self, obs: Observation) -> Score:
        import jsonschema

        value = _plain(obs.value)
        if value is None:
            try:
                value = json.loads(obs.text or "")
            except ValueError:
                return Score(self.name, 0.0, False, "the reply is not JSON")
        errors = sorted(jsonschema.Draft202012Validator(self.schema).iter_errors(value), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.path) or "(root)"
            return Score(self.name, 0.0, False, f"{where}: {first.message}")
        return Score(self.name, 1.0, True, "valid")


@dataclass
class OutputTypeValid:
    """The turn ended with a value of its output type (not an output error)."""

    name: str = "output_type"

    async def score(self, obs: Observation) -> Score:
        ok = obs.value is not None and obs.error is None
        return Score(self.name, 1.0 if ok else 0.0, ok,
                     "a valid value" if ok else (obs.error or "no typed value (the turn has no output type?)"))


@dataclass
class NoGuardrail:
    """No guardrail tripped during the turn."""

    name: str = "no_guardrail"

    async def score(self, obs: Observation) -> Score:
        names = [str(g.get("name") or g.get("guardrail") or "?") for g in obs.guardrails]
        ok = not names
        return Score(self.name, 1.0 if ok else 0.0, ok, "none tripped" if ok else f"tripped: {', '.join(names)}")


@dataclass
class Budget:
    """The turn stayed within a cost (USD), latency (ms) or token budget."""

    limit: float
    measure: str  # "cost" | "latency_ms" | "tokens"
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"max_{self.measure}"

    async def score(self, obs: Observation) -> Score:
        got = {"cost": obs.cost or 0.0, "latency_ms": obs.latency_ms, "tokens": float(obs.tokens)}[self.measure]
        ok = got <= self.limit
        share = 1.0 if ok else max(0.0, self.limit / got) if got else 0.0
        return Score(self.name, share, ok, f"{got:g} of {self.limit:g}")


_JUDGE_SYSTEM = (
    "You grade an AI assistant's reply against a rubric. Answer with one JSON object and "
    'nothing else: {"score": <a number from 0 to 1>, "reason": "<one sentence>"}.'
)


@dataclass
class LLMJudge:
    """A rubric graded by a defined model (its own cost is recorded on the score)."""

    rubric: str
    model: str | None = None
    threshold: float = 0.5
    name: str = "judge"

    async def score(self, obs: Observation) -> Score:
        from ..costs import call_cost
        from ..providers.base import ModelRequest

        rt = obs.runtime
        if rt is None:
            raise ScorerError("an LLM judge needs the runtime that ran the case")
        model = await rt.registry.aget("models", self.model, None) if self.model else await _default_model(rt)
        provider = rt.provider_for(model)
        lines = [f"Rubric:\n{self.rubric}", f"User message:\n{obs.input}", f"Reply:\n{obs.text or _plain(obs.value)}"]
        if obs.reference is not None:
            lines.append(f"Reference answer:\n{obs.reference}")
        response = await provider.request(ModelRequest(model=model.model, messages=[
            {"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": "\n\n".join(lines)}]))
        value, reason = _judgement(response.text)
        cost = call_cost(model, response.usage)
        if value is None:
            return Score(self.name, 0.0, False, f"the judge's answer holds no score: {response.text[:200]!r}",
                         self.threshold, cost)
        return Score(self.name, value, value >= self.threshold, reason, self.threshold, cost)


async def _default_model(rt: Any) -> Any:
    from ..definitions import ModelDefinition

    try:
        return await rt.registry.aget("models", "default", None)
    except StandardAgentsError:
        return ModelDefinition(name="default", provider="test", model="offline")


def _judgement(text: str) -> tuple[float | None, str]:
    """The score and reason of a judge's answer: its JSON object, else the first number."""
    match = re.search(r"\{.*\}", text or "", re.S)
    if match:
        try:
            body = json.loads(match.group(0))
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("score"), int | float):
            return min(1.0, max(0.0, float(body["score"]))), str(body.get("reason") or "")
    number = re.search(r"\b(0(?:\.\d+)?|1(?:\.0+)?)\b", text or "")
    if number:
        return float(number.group(1)), text.strip()[:200]
    return None, ""


def _plain(value: Any) -> Any:
    if value is None:
        return None
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


class _Adapted:
    """A user function or object as a :class:`Scorer`."""

    def __init__(self, fn: Callable[..., Any], name: str, threshold: float | None, options: dict[str, Any]) -> None:
        self.fn = fn
        self.name = name
        self.threshold = threshold
        self.options = options

    async def score(self, obs: Observation) -> Score:
        result = self.fn(obs, **self.options)
        if inspect.isawaitable(result):
            result = await result
        return _as_score(result, self.name, self.threshold)


def _as_score(result: Any, name: str, threshold: float | None) -> Score:
    reason = ""
    if isinstance(result, Score):
        if threshold is not None:
            result.threshold = threshold
            result.passed = result.passed and result.score >= threshold
        return result
    if isinstance(result, tuple) and len(result) == 2:
        result, reason = result
    if isinstance(result, dict):
        reason = str(result.get("reason") or reason)
        passed = result.get("passed")
        value = result.get("score")
        if value is None and passed is None:
            raise ScorerError(f"scorer {name} returned a dict without 'score' or 'passed'")
        value = float(value if value is not None else (1.0 if passed else 0.0))
        ok = bool(passed) if passed is not None else value >= (threshold if threshold is not None else 0.5)
        return Score(name, value, ok and (threshold is None or value >= threshold), reason, threshold)
    if isinstance(result, bool):
        return Score(name, 1.0 if result else 0.0, result, str(reason), threshold)
    if isinstance(result, int | float):
        value = float(result)
        if not 0 <= value <= 1:
            raise ScorerError(f"scorer {name} returned {value}, outside [0, 1]")
        return Score(name, value, value >= (threshold if threshold is not None else 0.5), str(reason), threshold)
    raise ScorerError(f"scorer {name} returned {type(result).__name__}; return a number in [0, 1], a bool, "
                      "(value, reason), a dict or a Score")


def scorer(fn: Callable[..., Any] | None = None, *, name: str | None = None,
           threshold: float | None = None) -> Any:
    """Mark a function ``(observation) -> score`` as a scorer (usable as ``@scorer`` or
    ``@scorer(name=..., threshold=...)``)."""

    def wrap(f: Callable[..., Any]) -> Scorer:
        return _Adapted(f, name or f.__name__, threshold, {})

    return wrap(fn) if fn is not None else wrap


def as_scorer(obj: Any, *, name: str | None = None, threshold: float | None = None,
              options: dict[str, Any] | None = None) -> Scorer:
    """A scorer from a Scorer, a function or a class (instantiated with ``options``)."""
    options = options or {}
    if inspect.isclass(obj):
        obj = obj(**options)
        options = {}
    if isinstance(obj, _Adapted) and not options:
        obj.threshold = threshold if threshold is not None else obj.threshold
        return obj
    if hasattr(obj, "score") and callable(obj.score):
        return _Adapted(obj.score, str(name or getattr(obj, "name", type(obj).__name__)), threshold, options)
    if callable(obj):
        return _Adapted(obj, str(name or getattr(obj, "__name__", "scorer")), threshold, options)
    raise ScorerError(f"{obj!r} is not a scorer (a function or a class with a score method)")


def load_scorer(ref: str, project: str | Path | None = None) -> Any:
    """The object a ``module:attribute`` reference names, importable from the project folder
    (its ``evals/`` folder first)."""
    module_name, _, attribute = ref.partition(":")
    if not module_name or not attribute:
        raise ScorerError(f"scorer {ref!r}: name it as module:function")
    if project is not None:
        for folder in (Path(project) / "evals", Path(project)):
            if folder.is_dir() and str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ScorerError(f"scorer {ref!r}: cannot import {module_name}: {exc}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ScorerError(f"scorer {ref!r}: {module_name} has no {attribute}") from None


def scorers_for(expect: Expect, project: str | Path | None = None) -> list[Scorer]:
    """The scorers an ``expect`` mapping names, in a fixed order (raises ScorerError for an
    unknown ``module:function``)."""
    out: list[Scorer] = []
    if expect.contains is not None:
        out.append(Contains(expect.contains))
    if expect.not_contains is not None:
        out.append(NotContains(expect.not_contains))
    if expect.equals is not None:
        out.append(Equals(expect.equals))
    if expect.regex is not None:
        out.append(Regex(expect.regex))
    if expect.tools is not None:
        tools = expect.tools if isinstance(expect.tools, ToolExpectation) else ToolExpectation(
            calls=[ToolCallExpectation(name=n) for n in expect.tools])
        out.append(ToolTrajectory(tools))
    if expect.json_schema is not None:
        out.append(JsonSchema(expect.json_schema))
    if expect.output_type:
        out.append(OutputTypeValid())
    if expect.no_guardrail:
        out.append(NoGuardrail())
    for limit, measure in ((expect.max_cost, "cost"), (expect.max_latency_ms, "latency_ms"),
                           (expect.max_tokens, "tokens")):
        if limit is not None:
            out.append(Budget(float(limit), measure))
    if expect.judge is not None:
        judge = expect.judge if isinstance(expect.judge, JudgeSpec) else JudgeSpec(rubric=expect.judge)
        out.append(LLMJudge(judge.rubric, judge.model, judge.threshold))
    for item in expect.scorers:
        spec = item if isinstance(item, ScorerRef) else ScorerRef(ref=item)
        obj = load_scorer(spec.ref, project)
        out.append(as_scorer(obj, name=spec.ref.partition(":")[2], threshold=spec.threshold, options=spec.options))
    return out
