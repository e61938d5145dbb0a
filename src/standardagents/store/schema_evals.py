"""The evaluation tables: experiment runs, each case's result, and the scores stored with the
executions they judged (from an experiment or from online scoring).

Revision 0006 creates the same shape."""

from __future__ import annotations

from sqlalchemy import JSON as sa_JSON
from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Integer, String, Table, Text

from .schema import metadata

__all__ = ["eval_results", "eval_runs", "eval_scores"]

JSON = sa_JSON(none_as_null=True)

eval_runs = Table(
    "eval_runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("label", String(255)),
    Column("datasets", JSON),
    Column("options", JSON),
    Column("passed", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("summary", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger),
)

eval_results = Table(
    "eval_results",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("run_id", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("dataset", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("error", Text),
    Column("scores", JSON),
    Column("reply", Text),
    Column("tokens", Integer, nullable=False),
    Column("cost", Float),
    Column("latency_ms", Float, nullable=False),
    Column("execution_id", String(64)),
    Column("thread_id", String(64)),
    Column("detail", JSON),
    Index("ix_eval_results_run", "run_id", "seq"),
)

eval_scores = Table(
    "eval_scores",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("execution_id", String(64), nullable=False),
    Column("run_id", String(64)),
    Column("source", String(16), nullable=False),
    Column("name", String(255), nullable=False),
    Column("score", Float, nullable=False),
    Column("passed", Boolean, nullable=False),
    Column("reason", Text),
    Column("cost", Float),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_eval_scores_execution", "execution_id"),
)
