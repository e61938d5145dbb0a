"""Experiments and scores in the runtime's store: one transaction per call, on the SQL store's
own connection (SQLite) or pool (PostgreSQL), with the tables of ``store.schema_evals``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select

from ..records import new_id, now_ms
from ..store.schema_evals import eval_results, eval_runs, eval_scores

__all__ = ["get_run", "list_runs", "save_run", "save_scores", "scores_of"]


async def _run(store: Any, fn: Any, *args: Any, write: bool = True) -> Any:
    return await store._run(fn, *args, write=write)  # the SQL store's one-transaction runner


def _save_run(conn: Connection, run: dict[str, Any], results: list[dict[str, Any]],
              scores: list[dict[str, Any]]) -> None:
    conn.execute(insert(eval_runs), [run])
    if results:
        conn.execute(insert(eval_results), results)
    if scores:
        conn.execute(insert(eval_scores), scores)


async def save_run(store: Any, report: dict[str, Any]) -> str:
    """Store a finished experiment (its JSON report) with each case's result, and each case's
    scores with the execution it judged; returns the run's id."""
    run_id = report["id"]
    run = {"id": run_id, "label": report.get("label"), "datasets": report.get("datasets"),
           "options": report.get("options"), "passed": report["passed"], "failed": report["failed"],
           "summary": report.get("summary"), "created_at": report["startedAt"],
           "finished_at": report.get("finishedAt")}
    results, scores = [], []
    created = now_ms()
    for seq, case in enumerate(report["cases"]):
        results.append({
            "id": new_id("evr_"), "run_id": run_id, "seq": seq, "dataset": case["dataset"], "name": case["name"],
            "repeat": case.get("repeat", 0), "passed": case["passed"], "error": case.get("error"),
            "scores": case["scores"], "reply": case.get("reply"), "tokens": case.get("tokens") or 0,
            "cost": case.get("cost"), "latency_ms": case.get("latencyMs") or 0.0,
            "execution_id": case.get("executionId"), "thread_id": case.get("threadId"),
            "detail": {k: case[k] for k in ("unmatchedCalls", "toolCalls", "input") if k in case},
        })
        if case.get("executionId"):
            scores.extend(_score_rows(case["executionId"], case["scores"], "experiment", run_id, created))
    await _run(store, _save_run, run, results, scores)
    return str(run_id)


def _score_rows(execution_id: str, scores: list[dict[str, Any]], source: str, run_id: str | None,
                created: int) -> list[dict[str, Any]]:
    return [{"id": new_id("evs_"), "execution_id": execution_id, "run_id": run_id, "source": source,
             "name": s["name"], "score": float(s["score"]), "passed": bool(s["passed"]), "reason": s.get("reason"),
             "cost": s.get("cost"), "created_at": created} for s in scores]


def _insert_scores(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(insert(eval_scores), rows)


async def save_scores(store: Any, execution_id: str, scores: list[dict[str, Any]], *,
                      source: str = "online") -> None:
    """Store scores with the execution they judged (online scoring)."""
    await _run(store, _insert_scores, _score_rows(execution_id, scores, source, None, now_ms()))


def _run_dict(row: Any) -> dict[str, Any]:
    return {"id": row.id, "label": row.label, "datasets": row.datasets or [], "options": row.options or {},
            "passed": row.passed, "failed": row.failed, "summary": row.summary or {},
            "startedAt": row.created_at, "finishedAt": row.finished_at}


def _list_runs(conn: Connection, limit: int, offset: int) -> list[dict[str, Any]]:
    rows = conn.execute(select(eval_runs).order_by(eval_runs.c.created_at.desc(), eval_runs.c.id)
                        .limit(limit).offset(offset)).all()
    return [_run_dict(r) for r in rows]


async def list_runs(store: Any, *, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
    """Stored experiments, newest first."""
    result: list[dict[str, Any]] = await _run(store, _list_runs, limit, offset, write=False)
    return result


def _get_run(conn: Connection, run_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(eval_runs).where(eval_runs.c.id == run_id)).first()
    if row is None:
        return None
    out = _run_dict(row)
    cases = conn.execute(select(eval_results).where(eval_results.c.run_id == run_id)
                         .order_by(eval_results.c.seq)).all()
    out["cases"] = [{"dataset": c.dataset, "name": c.name, "repeat": c.repeat, "passed": c.passed, "error": c.error,
                     "scores": c.scores or [], "reply": c.reply, "tokens": c.tokens, "cost": c.cost,
                     "latencyMs": c.latency_ms, "executionId": c.execution_id, "threadId": c.thread_id,
                     **(c.detail or {})} for c in cases]
    return out


async def get_run(store: Any, run_id: str) -> dict[str, Any] | None:
    """One stored experiment with its cases (in run order), or None."""
    result: dict[str, Any] | None = await _run(store, _get_run, run_id, write=False)
    return result


def _scores_of(conn: Connection, execution_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(select(eval_scores).where(eval_scores.c.execution_id == execution_id)
                        .order_by(eval_scores.c.created_at, eval_scores.c.name)).all()
    return [{"name": r.name, "score": r.score, "passed": r.passed, "reason": r.reason, "cost": r.cost,
             "source": r.source, "runId": r.run_id, "createdAt": r.created_at} for r in rows]


async def scores_of(store: Any, execution_id: str) -> list[dict[str, Any]]:
    """The scores stored with an execution (experiments' and online), oldest first."""
    result: list[dict[str, Any]] = await _run(store, _scores_of, execution_id, write=False)
    return result
