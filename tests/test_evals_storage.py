"""Experiments and scores in the store, on SQLite and PostgreSQL: a run with its cases in
order, runs newest first, scores by execution (experiment's and online)."""

from __future__ import annotations

from typing import Any

from standardagents.evals.storage import get_run, list_runs, save_run, save_scores, scores_of
from standardagents.store import SQLStore


def _report(run_id: str, started: int, passed: bool) -> dict[str, Any]:
    score = {"name": "contains", "score": 1.0 if passed else 0.0, "passed": passed, "reason": "r",
             "threshold": None, "cost": None}
    return {"id": run_id, "label": run_id, "startedAt": started, "finishedAt": started + 5,
            "datasets": [{"name": "basic"}], "options": {"concurrency": 2}, "passed": int(passed),
            "failed": int(not passed), "summary": {"cases": 2},
            "cases": [{"dataset": "basic", "name": "a", "repeat": 0, "passed": passed, "error": None,
                       "scores": [score], "reply": "84", "tokens": 10, "cost": 0.5, "latencyMs": 12.5,
                       "executionId": f"exe_{run_id}", "threadId": "thr_1", "toolCalls": [], "input": "q"},
                      {"dataset": "basic", "name": "b", "repeat": 0, "passed": False, "error": "basic.yaml: case b: x",
                       "scores": [], "reply": None, "tokens": 0, "cost": None, "latencyMs": 0.0,
                       "executionId": None, "threadId": None}]}


async def test_runs_round_trip_with_their_cases_in_order(store: SQLStore) -> None:
    await save_run(store, _report("run_old", 1000, True))
    await save_run(store, _report("run_new", 2000, False))
    listed = await list_runs(store)
    run = await get_run(store, "run_old")
    assert [(r["id"], r["passed"], r["failed"]) for r in listed] == [("run_new", 0, 1), ("run_old", 1, 0)]
    assert run is not None
    assert [(c["name"], c["passed"], c["error"], c["tokens"], c["cost"], c["latencyMs"]) for c in run["cases"]] == [
        ("a", True, None, 10, 0.5, 12.5), ("b", False, "basic.yaml: case b: x", 0, None, 0.0)]
    assert run["options"] == {"concurrency": 2}
    assert await get_run(store, "run_missing") is None


async def test_scores_are_kept_by_execution_from_runs_and_online(store: SQLStore) -> None:
    await save_run(store, _report("run_a", 1000, True))
    await save_scores(store, "exe_run_a", [{"name": "judge", "score": 0.75, "passed": True, "reason": "ok",
                                            "cost": 0.001}])
    found = await scores_of(store, "exe_run_a")
    assert sorted((s["name"], s["score"], s["source"], s["runId"], s["cost"]) for s in found) == [
        ("contains", 1.0, "experiment", "run_a", None), ("judge", 0.75, "online", None, 0.001)]
