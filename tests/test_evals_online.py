"""Online scoring: a sample of an agent's turns scored after their done, off the turn's path,
stored with the execution and counted in the metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evals_helpers import make_project
from standardagents import Runtime
from standardagents.evals import Contains, DatasetError, Observation, scorer
from standardagents.evals.online import OnlineRule, attach_online, load_online_rules
from standardagents.evals.storage import scores_of
from standardagents.observability import metrics


async def _open(project: Path) -> Runtime:
    return await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)


async def test_scoring_runs_after_done_without_holding_the_turn(tmp_path: Path) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @scorer(name="slow_judge")
    async def slow_judge(obs: Observation) -> tuple[float, str]:
        started.set()
        await release.wait()
        return 1.0, f"judged {obs.text}"

    rt = await _open(make_project(tmp_path))
    try:
        scoring = attach_online(rt, [OnlineRule("assistant", [slow_judge], rate=1.0)])
        result = await rt.run("assistant", "What is 12 * 7?")  # returns while the scorer still waits
        await asyncio.wait_for(started.wait(), 10)
        before = await scores_of(rt.store, result.execution_id)
        release.set()
        await scoring.drain()
        after = await scores_of(rt.store, result.execution_id)
    finally:
        await rt.aclose()
    assert result.text == "12 * 7 = 84"
    assert before == []
    assert [(s["name"], s["score"], s["passed"], s["reason"], s["source"]) for s in after] == [
        ("slow_judge", 1.0, True, "judged 12 * 7 = 84", "online")]


async def test_rate_zero_scores_no_turn_and_rate_one_every_turn(tmp_path: Path) -> None:
    rt = await _open(make_project(tmp_path))
    try:
        never = attach_online(rt, [OnlineRule("assistant", [Contains("84")], rate=0.0)])
        first = await rt.run("assistant", "What is 12 * 7?")
        await never.detach()
        always = attach_online(rt, [OnlineRule("assistant", [Contains("84")], rate=1.0)])
        second = await rt.run("assistant", "What is 12 * 7?")
        third = await rt.run("assistant", "What is 2 + 2?")
        await always.detach()
        stored = [await scores_of(rt.store, r.execution_id) for r in (first, second, third)]
    finally:
        await rt.aclose()
    assert [[(s["name"], s["passed"]) for s in scores] for scores in stored] == [
        [], [("contains", True)], [("contains", False)]]
    assert (never.scored, always.scored) == (0, 2)


async def test_scores_are_counted_in_the_metrics(tmp_path: Path) -> None:
    meter = metrics.enable()
    assert meter is not None
    labels = {"agent": "assistant", "scorer": "contains", "result": "pass"}
    before = meter.registry.get_sample_value("standardagents_eval_scores_total", labels) or 0.0
    rt = await _open(make_project(tmp_path))
    try:
        scoring = attach_online(rt, [OnlineRule("assistant", [Contains("84")], rate=1.0)])
        await rt.run("assistant", "What is 12 * 7?")
        await scoring.detach()
    finally:
        await rt.aclose()
    assert meter.registry.get_sample_value("standardagents_eval_scores_total", labels) == before + 1
    assert b"standardagents_eval_scores_total" in meter.exposition()[0]


async def test_other_agents_turns_are_not_scored(tmp_path: Path) -> None:
    rt = await _open(make_project(tmp_path))
    try:
        scoring = attach_online(rt, [OnlineRule("researcher", [Contains("x")], rate=1.0)])
        result = await rt.run("assistant", "What is 12 * 7?")
        await scoring.detach()
        stored = await scores_of(rt.store, result.execution_id)
    finally:
        await rt.aclose()
    assert stored == []


def test_online_rules_load_from_the_projects_online_file(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "evals" / "online.yaml").write_text(
        "- agent: assistant\n  rate: 0.25\n  expect: {contains: '84', max_latency_ms: 2000}\n")
    rules = load_online_rules(project)
    assert [(r.agent, r.rate, [s.name for s in r.scorers]) for r in rules] == [
        ("assistant", 0.25, ["contains", "max_latency_ms"])]


def test_an_online_rule_with_a_bad_rate_names_the_file_and_rule(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "evals" / "online.yaml").write_text("- agent: assistant\n  rate: 2\n")
    with pytest.raises(DatasetError) as info:
        load_online_rules(project)
    assert str(info.value) == f"{project / 'evals' / 'online.yaml'}: rule 1: rate: Input should be less than or equal to 1"


def test_a_server_scores_turns_by_its_projects_online_file(tmp_path: Path) -> None:
    import time

    from starlette.testclient import TestClient

    from standardagents.server import create_app

    project = make_project(tmp_path)
    (project / "evals" / "online.yaml").write_text("- agent: assistant\n  rate: 1.0\n  expect: {contains: '84'}\n")

    async def open_runtime() -> Runtime:
        return await _open(project)

    rt = asyncio.run(open_runtime())
    app = create_app(rt, dev=True)
    with TestClient(app) as client:
        thread = client.post("/api/threads", json={"agent": "assistant"}).json()
        done = client.post(f"/api/threads/{thread['id']}/messages?wait=true", json={"content": "What is 12 * 7?"})
        execution_id = done.json()["executionId"]
        deadline = time.monotonic() + 10
        scores: list[dict[str, object]] = []
        while not scores and time.monotonic() < deadline:
            scores = client.get(f"/api/evals/executions/{execution_id}/scores").json()["scores"]
    assert [(s["name"], s["passed"], s["source"]) for s in scores] == [("contains", True, "online")]


async def test_online_scores_are_span_events_tagged_with_the_turns_trace(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from standardagents import observability

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observability.set_tracer_provider(provider)
    try:
        rt = await _open(make_project(tmp_path))
        try:
            scoring = attach_online(rt, [OnlineRule("assistant", [Contains("84")], rate=1.0)])
            result = await rt.run("assistant", "What is 12 * 7?")
            await scoring.detach()
        finally:
            await rt.aclose()
    finally:
        observability.set_tracer_provider(None)
    spans = exporter.get_finished_spans()
    scored = [s for s in spans if s.name == "standardagents.eval.online"]
    turn_trace = next(s.context.trace_id for s in spans if s.name != "standardagents.eval.online")
    assert len(scored) == 1
    assert scored[0].attributes["standardagents.execution_id"] == result.execution_id
    assert scored[0].attributes["standardagents.turn_trace_id"] == format(turn_trace, "032x")
    assert [(e.name, dict(e.attributes)) for e in scored[0].events] == [
        ("eval.score", {"scorer": "contains", "score": 1.0, "passed": True, "reason": "all found"})]
