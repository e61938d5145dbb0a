"""The evaluation runs, their cases and the scores stored with executions.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("label", sa.String(255)),
        sa.Column("datasets", sa.JSON),
        sa.Column("options", sa.JSON),
        sa.Column("passed", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("summary", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("finished_at", sa.BigInteger),
    )
    op.create_table(
        "eval_results",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("dataset", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("repeat", sa.Integer, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("scores", sa.JSON),
        sa.Column("reply", sa.Text),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("cost", sa.Float),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("execution_id", sa.String(64)),
        sa.Column("thread_id", sa.String(64)),
        sa.Column("detail", sa.JSON),
    )
    op.create_index("ix_eval_results_run", "eval_results", ["run_id", "seq"])
    op.create_table(
        "eval_scores",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("execution_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("cost", sa.Float),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_eval_scores_execution", "eval_scores", ["execution_id"])


def downgrade() -> None:
    op.drop_index("ix_eval_scores_execution", "eval_scores")
    op.drop_table("eval_scores")
    op.drop_index("ix_eval_results_run", "eval_results")
    op.drop_table("eval_results")
    op.drop_table("eval_runs")
